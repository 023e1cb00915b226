// grouped_mma_int8 (backend/cuda/grouped_mma_int8.h), the routed experts of a chunk on int8
// tensor cores, against the host:
//   exact     every routed (token, expert) output row == ds4::dot_act on the host (memcmp): the
//             same int8 products summed in int32, the same f32 block terms in column order;
//             for IQ2_XXS, Q2_K and Q8_0, chunks of 1 .. 256 tokens routed top-2 over 8 experts
//             (about 0.25 .. 64 rows per expert), one expert never routed (a hole), a skewed
//             chunk (every token to experts 1 and 6: 64 rows each), odd shapes (rows not a
//             multiple of the 128-row block tile, an odd number of K tiles / super-blocks);
//             entries per block by the chunk and forced 1, 2 and 4 (all must give the same bits),
//             and the staged kernel at 4 entries compiled for two blocks per SM (occupancy 2);
//   BF16      the same chunk through grouped_mma_bf16 on the unquantized rows: max |int8 - bf16|
//             / max |bf16| <= 3e-2 (activation quantization, Q8_K: ~amax / 254 per value, plus
//             BF16's ~2^-9; the measured value is printed);
//   planes    grouped_mma_int8_planes (two Q8_K planes per token, entries of <= 8 tokens) on
//             Q2_K / IQ2_XXS: quantize_act_planes == the host's bytes; every output ==
//             dot_act(high) + dot_act(low) (memcmp), staged and unstaged, every entries-per-block
//             choice; within 2e-4 of max |y| of the f32 product of the dequantized weights;
//   dense     grouped_mma_int8_dense (a tensor-core chunk's dense products): groups of one weight
//             each (o_a's form: group g's x columns at g * cols of a wider row, its y at g * rows),
//             1 .. 300 rows in slices of 16, every output == dot_act (memcmp), staged and
//             unstaged, entries per block by the row count and forced; untouched y between the
//             groups' outputs stays as it was;
//   bad input InputError for an unsupported format, a mismatched activation block and an odd x_row
//             (both entry points).
// Usage: test_grouped_mma_int8 (exit 1 when a check fails; a few seconds, most of it the host reference)
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/check.h"
#include "backend/cuda/gemv.h"
#include "backend/cuda/gemv_act.h"
#include "backend/cuda/grouped_mma.h"
#include "backend/cuda/grouped_mma_int8.h"
#include "backend/cuda/memory.h"
#include "backend/cuda/moe_group.h"
#include "core/act_quant.h"
#include "device_weight.h"
#include "host_ref.h"
#include "test_common.h"

using namespace ds4;
using namespace ds4::cuda_test;

namespace {

cudaStream_t g_stream = nullptr;

template <class T>
std::vector<T> download(const T* p, size_t n) {
  std::vector<T> v(n);
  DS4_CUDA_CHECK(cudaStreamSynchronize(g_stream));
  DS4_CUDA_CHECK(cudaMemcpy(v.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost));
  return v;
}

// How many of a's floats differ from b's in their bits (memcmp: NaN poison counts as differing).
int64_t bits_differ(const std::vector<float>& a, const std::vector<float>& b) {
  int64_t bad = 0;
  for (size_t i = 0; i < a.size(); ++i) bad += std::memcmp(&a[i], &b[i], 4) != 0;
  return bad;
}
template <class T>
void upload_to(void* dst, const T* v, size_t n) {
  DS4_CUDA_CHECK(cudaStreamSynchronize(g_stream));
  DS4_CUDA_CHECK(cudaMemcpy(dst, v, n * sizeof(T), cudaMemcpyHostToDevice));
  DS4_CUDA_CHECK(cudaDeviceSynchronize());
}

// Token rows: normal values, a zero 256-block, a +-max tie (Q8_K takes the first) and values on
// .5 steps of a Q8_0 scale.
std::vector<float> activations(int64_t rows, int64_t n, std::mt19937_64& rng) {
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<float> x(size_t(rows * n));
  for (int64_t r = 0; r < rows; ++r) {
    float* row = x.data() + r * n;
    for (int64_t i = 0; i < n; ++i) row[i] = nd(rng);
    if (n >= 512 && r % 3 == 1)
      for (int64_t i = 256; i < 512; ++i) row[i] = 0.f;
    if (n >= 512 && r % 3 == 2) {
      for (int64_t i = 256; i < 512; ++i) row[i] = std::fmod(row[i], 3.f);
      row[256 + 7] = -3.5f;
      row[256 + 100] = 3.5f;
    }
    if (r % 4 == 3)
      for (int64_t i = 0; i < 32; ++i) row[i] = (i == 0 ? 127.f : float(int(i % 9) - 4) + 0.5f) * 0.01f;
  }
  return x;
}

// Routing {tokens, k}: k distinct experts per token, uniform over all but `hole`; skewed: every
// token to experts 1 and E - 2.
std::vector<int32_t> route(int64_t tokens, int64_t k, int64_t E, int64_t hole, bool skewed, std::mt19937_64& rng) {
  std::vector<int32_t> ids(size_t(tokens * k));
  std::vector<int32_t> pool;
  for (int32_t e = 0; e < E; ++e)
    if (e != hole) pool.push_back(e);
  for (int64_t t = 0; t < tokens; ++t) {
    if (skewed) {
      ids[size_t(t * k)] = 1, ids[size_t(t * k + 1)] = int32_t(E - 2);
      continue;
    }
    for (int64_t j = 0; j < k; ++j) std::swap(pool[size_t(j)], pool[size_t(j + int64_t(rng() % (pool.size() - size_t(j))))]);
    for (int64_t j = 0; j < k; ++j) ids[size_t(t * k + j)] = pool[size_t(j)];
  }
  return ids;
}

struct Shape {
  DType type;
  int64_t rows, cols;
};

// planes: grouped_mma_int8_planes on two Q8_K planes per token (quantize_act_planes; entries of
// at most 8 tokens: moe_group with a stride of 8); the reference is dot_act(high) + dot_act(low),
// and the outputs are compared with the f32 product of the dequantized weights too.
void check_chunk(const Shape& sh, int64_t tokens, bool skewed, std::mt19937_64& rng, cudaStream_t s,
                 bool planes = false) {
  constexpr int64_t E = 8, K = 2;
  const int64_t S = planes ? cuda::kGemvMaxRows / 2 : cuda::kGemvMaxRows, P = planes ? 2 : 1;
  const ActBlock block = act_block_for(sh.type);
  const HostWeight hw = random_weight(sh.type, E * sh.rows, sh.cols, rng);
  const DeviceWeight dw = upload(hw);
  DS4_CUDA_CHECK(cudaDeviceSynchronize());
  WeightMatrix dv = dw.view;  // one expert's rows (the upload views all E experts' as one matrix)
  dv.rows = sh.rows;
  const WeightMatrix hv = host_view(hw);
  const int64_t row_bytes = hv.row_stride_bytes();
  const std::vector<float> x = activations(tokens, sh.cols, rng);
  const ActQ8Rows xq = planes ? quantize_act_planes_rows(x.data(), sh.cols, tokens)
                              : quantize_act_rows(block, x.data(), sh.cols, tokens);
  const std::vector<int32_t> ids = route(tokens, K, E, 5, skewed, rng);
  const int64_t pairs = tokens * K, entries = cuda::moe_group_entries(tokens, K, E, S);
  // host reference: pair p = t K + j is expert ids[p]'s rows dotted with token t
  std::vector<float> ref(size_t(pairs * sh.rows));
  for (int64_t p = 0; p < pairs; ++p) {
    WeightMatrix e = hv;
    e.rows = sh.rows;
    e.data = static_cast<const uint8_t*>(hv.data) + ids[size_t(p)] * sh.rows * row_bytes;
    const int64_t t = p / K;
    for (int64_t r = 0; r < sh.rows; ++r)
      ref[size_t(p * sh.rows + r)] =
          planes ? dot_act(e, r, xq.row(2 * t)) + dot_act(e, r, xq.row(2 * t + 1)) : dot_act(e, r, xq.row(t));
  }
  // device operands: the host's quantized rows (test_gemv_act pins quantize_act to them byte for byte)
  cuda::DeviceBuffer qbuf(size_t(P * tokens) * cuda::act_q8_row_bytes(block, sh.cols), "test xq"),
      qdev(size_t(P * tokens) * cuda::act_q8_row_bytes(block, sh.cols), "device-quantized xq"),
      xf(x.size() * 4, "test x f32"), di(ids.size() * 4, "ids"), de(size_t(entries) * 4, "experts"), dl(4, "live"),
      dc(size_t(entries) * 4, "counts"), dt(size_t(entries * S) * 4, "tok"), ds(size_t(entries * S) * 4, "slot"),
      dy(ref.size() * 4, "y"), dyb(ref.size() * 4, "y bf16");
  const cuda::DeviceActQ8 dq = cuda::act_q8_carve(qbuf.get(), block, sh.cols, P * tokens);
  upload_to(dq.q, xq.q.data(), xq.q.size());
  upload_to(dq.d, xq.d.data(), xq.d.size());
  if (block == ActBlock::kQ8_K) upload_to(dq.bsums, xq.bsums.data(), xq.bsums.size());
  upload_to(xf.get(), x.data(), x.size());
  upload_to(di.get(), ids.data(), ids.size());
  if (planes) {  // the device's planes: the host's bytes (quantize_act_planes vs quantize_act_planes_rows)
    const cuda::DeviceActQ8 qd = cuda::act_q8_carve(qdev.get(), block, sh.cols, P * tokens);
    cuda::quantize_act_planes(xf.as<float>(), sh.cols, tokens, qd, s);
    const auto q = download(qd.q, xq.q.size());
    const auto d = download(qd.d, xq.d.size());
    const auto b = download(qd.bsums, xq.bsums.size());
    check(std::memcmp(q.data(), xq.q.data(), q.size()) == 0 && std::memcmp(d.data(), xq.d.data(), 4 * d.size()) == 0 &&
              std::memcmp(b.data(), xq.bsums.data(), 2 * b.size()) == 0,
          "quantize_act_planes " + std::to_string(tokens) + " x " + std::to_string(sh.cols) +
              ": the host's planes byte for byte (q, d, bsums)");
  }
  const cuda::MoeGroup g{de.as<int32_t>(), dl.as<int32_t>(), dc.as<int32_t>(), dt.as<int32_t>(), ds.as<int32_t>(), S};
  cuda::moe_group(di.as<int32_t>(), tokens, K, E, g, s);
  cuda::GemvRows r;
  r.n = int(std::min<int64_t>(tokens, S));
  r.idx_stride = int(S);
  r.batch = cuda::GemvBatch{int(entries), g.experts, size_t(sh.rows * row_bytes), 0, 0, 0};
  r.live = g.live, r.counts = g.counts;
  r.x_row = P * sh.cols, r.x_idx = g.tok, r.y_row = sh.rows, r.y_idx = g.slot;
  const int64_t rows_per_expert = pairs / E;
  const std::string what = std::string(dtype_name(sh.type)) + " " + std::to_string(sh.rows) + "x" +
                           std::to_string(sh.cols) + ", " + std::to_string(tokens) + " tokens top-2 of 8" +
                           (skewed ? " (skewed: 2 experts)" : " (expert 5 a hole)") + (planes ? ", two planes" : "");
  const int keep = cuda::grouped_mma_entries_per_block();
  const bool keep_staged = cuda::grouped_mma_int8_staged();
  // the unstaged and the staged kernel (weights through shared memory; Q8_0 only where cols % 256
  // == 0, else the unstaged one either way)
  const int keep_occ = cuda::grouped_mma_int8_occupancy();
  // (occupancy 2: the staged kernel at 4 entries compiled for two blocks per SM)
  for (int occ : {1, 2})
    for (bool staged : {false, true})
      for (int forced : {0, 1, 2, cuda::kGroupedMmaMaxEntries}) {
        if (occ == 2 && (!staged || forced != cuda::kGroupedMmaMaxEntries)) continue;
        cuda::grouped_mma_int8_set_occupancy(occ);
        cuda::grouped_mma_int8_set_staged(staged);
        cuda::grouped_mma_set_entries_per_block(forced);
        check(cuda::grouped_mma_int8_stages(dv) == (staged && (sh.type != DType::Q8_0 || sh.cols % 256 == 0)),
              what + ": the staged kernel runs exactly when asked for (Q2_K / IQ2_XXS; Q8_0 with cols % 256 == 0)");
        DS4_CUDA_CHECK(cudaMemsetAsync(dy.get(), 0xff, dy.bytes(), s));  // NaN: a row never written shows
        if (planes) cuda::grouped_mma_int8_planes(dv, dq.row(0), dy.as<float>(), r, s, rows_per_expert);
        else cuda::grouped_mma_int8(dv, dq.row(0), dy.as<float>(), r, s, rows_per_expert);
        const std::vector<float> got = download(dy.as<float>(), ref.size());
        const int64_t bad = bits_differ(got, ref);
        check(bad == 0, what + (staged ? ", staged" : "") + (occ == 2 ? " (two blocks per SM)" : "") + ", entries per block " +
                            (forced ? std::to_string(forced) : "by the chunk") + ": == dot_act (memcmp), " +
                            std::to_string(bad) + " of " + std::to_string(ref.size()) + " differ");
      }
  cuda::grouped_mma_int8_set_staged(keep_staged);
  cuda::grouped_mma_int8_set_occupancy(keep_occ);
  cuda::grouped_mma_set_entries_per_block(0);
  if (planes) {  // against the f32 product of the dequantized weights (one plane: ~1e-2 here)
    std::vector<float> wr(size_t(sh.cols));
    double err = 0, peak = 0;
    for (int64_t p = 0; p < pairs; ++p)
      for (int64_t r2 = 0; r2 < sh.rows; ++r2) {
        dequantize_row(hv, ids[size_t(p)] * sh.rows + r2, wr.data());
        double acc = 0;
        for (int64_t c = 0; c < sh.cols; ++c) acc += double(wr[size_t(c)]) * double(x[size_t((p / K) * sh.cols + c)]);
        err = std::max(err, std::fabs(double(ref[size_t(p * sh.rows + r2)]) - acc));
        peak = std::max(peak, std::fabs(acc));
      }
    char line[128];
    std::snprintf(line, sizeof line, ": two planes vs the f32 product, max |err| / max |y| = %.2e (<= 2e-4)",
                  err / std::max(peak, 1e-30));
    check(err <= 2e-4 * peak, what + line);
    return;
  }
  r.x_row = sh.cols;
  cuda::grouped_mma_bf16(dv, xf.as<float>(), dyb.as<float>(), r, s, rows_per_expert);
  cuda::grouped_mma_set_entries_per_block(keep);
  const std::vector<float> yb = download(dyb.as<float>(), ref.size());
  float peak = 0.f;
  for (float v : yb) peak = std::max(peak, std::fabs(v));
  const float rel = max_diff(ref.data(), yb.data(), ref.size()) / std::max(peak, 1e-30f);
  char line[96];
  std::snprintf(line, sizeof line, ": max |int8 - bf16| / max |bf16| = %.2e (<= 3e-2)", double(rel));
  check(rel <= 3e-2f, what + line);
}

// grouped_mma_int8_dense: `groups` weights of sh's shape side by side (w_stride apart), n rows of
// x each {groups * cols} wide (group g reads columns g * cols ..), y rows {groups * rows + 8}
// wide (group g writes g * rows ..; the last 8 floats of a row are never written).
void check_dense(const Shape& sh, int groups, int64_t n, std::mt19937_64& rng, cudaStream_t s) {
  const ActBlock block = act_block_for(sh.type);
  const HostWeight hw = random_weight(sh.type, groups * sh.rows, sh.cols, rng);
  const DeviceWeight dw = upload(hw);
  DS4_CUDA_CHECK(cudaDeviceSynchronize());
  WeightMatrix dv = dw.view;
  dv.rows = sh.rows;
  const WeightMatrix hv = host_view(hw);
  const size_t w_stride = size_t(sh.rows * hv.row_stride_bytes());
  const int64_t xw = groups * sh.cols, yw = groups * sh.rows + 8;
  const std::vector<float> x = activations(n, xw, rng);
  const ActQ8Rows xq = quantize_act_rows(block, x.data(), xw, n);
  std::vector<float> ref(size_t(n * yw));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t c = groups * sh.rows; c < yw; ++c) ref[size_t(i * yw + c)] = -7.f;  // the poison below
  for (int g = 0; g < groups; ++g) {
    WeightMatrix e = hv;
    e.rows = sh.rows;
    e.data = static_cast<const uint8_t*>(hv.data) + g * w_stride;
    for (int64_t i = 0; i < n; ++i) {
      ActQ8View xv = xq.row(i);  // group g's columns: the row's blocks from g * cols
      const int64_t bv = act_values_per_scale(block), c0 = g * sh.cols;
      xv.q += c0;
      xv.d += c0 / bv;
      if (xv.bsums) xv.bsums += c0 / 16;
      xv.n = sh.cols;
      for (int64_t r = 0; r < sh.rows; ++r) ref[size_t(i * yw + g * sh.rows + r)] = dot_act(e, r, xv);
    }
  }
  cuda::DeviceBuffer qbuf(size_t(n) * cuda::act_q8_row_bytes(block, xw), "test xq"), dy(ref.size() * 4, "y");
  const cuda::DeviceActQ8 dq = cuda::act_q8_carve(qbuf.get(), block, xw, n);
  upload_to(dq.q, xq.q.data(), xq.q.size());
  upload_to(dq.d, xq.d.data(), xq.d.size());
  if (block == ActBlock::kQ8_K) upload_to(dq.bsums, xq.bsums.data(), xq.bsums.size());
  ActQ8View x0 = dq.row(0);
  x0.n = sh.cols;
  const cuda::DenseGroups dg{groups, w_stride, sh.cols, sh.rows};
  const std::string what = "dense " + std::string(dtype_name(sh.type)) + " " + std::to_string(sh.rows) + "x" +
                           std::to_string(sh.cols) + " x " + std::to_string(groups) + " groups, " + std::to_string(n) +
                           " rows";
  const bool keep_staged = cuda::grouped_mma_int8_staged();
  for (bool staged : {false, true})
    for (int forced : {0, 1, cuda::kGroupedMmaMaxEntries}) {
      cuda::grouped_mma_int8_set_staged(staged);
      cuda::grouped_mma_set_entries_per_block(forced);
      std::vector<float> poison(ref.size(), -7.f);
      upload_to(dy.get(), poison.data(), poison.size());
      cuda::grouped_mma_int8_dense(dv, x0, xw, dy.as<float>(), yw, n, dg, s);
      const std::vector<float> got = download(dy.as<float>(), ref.size());
      const int64_t bad = bits_differ(got, ref);
      check(bad == 0, what + (staged ? ", staged" : "") + ", entries per block " +
                          (forced ? std::to_string(forced) : "by the rows") + ": == dot_act (memcmp), rest untouched, " +
                          std::to_string(bad) + " of " + std::to_string(ref.size()) + " differ");
    }
  cuda::grouped_mma_int8_set_staged(keep_staged);
  cuda::grouped_mma_set_entries_per_block(0);
}

void check_bad_input(std::mt19937_64& rng, cudaStream_t s) {
  const HostWeight q2 = random_weight(DType::Q2_K, 8, 256, rng), f32 = random_weight(DType::F32, 8, 256, rng);
  const DeviceWeight d2 = upload(q2), df = upload(f32);
  cuda::DeviceBuffer qbuf(4 * cuda::act_q8_row_bytes(ActBlock::kQ8_K, 256), "xq"),
      q0buf(4 * cuda::act_q8_row_bytes(ActBlock::kQ8_0, 256), "xq0"), y(4 * 8 * 4, "y");
  const cuda::DeviceActQ8 xk = cuda::act_q8_carve(qbuf.get(), ActBlock::kQ8_K, 256, 4),
                          x0 = cuda::act_q8_carve(q0buf.get(), ActBlock::kQ8_0, 256, 4);
  cuda::GemvRows r;
  r.n = 4, r.x_row = 256, r.y_row = 8;
  auto throws = [&](const WeightMatrix& w, const ActQ8View& x, const cuda::GemvRows& rr) {
    try {
      cuda::grouped_mma_int8(w, x, y.as<float>(), rr, s);
    } catch (const InputError&) {
      return true;
    }
    return false;
  };
  check(throws(df.view, xk.row(0), r), "bad input: F32 weight -> InputError");
  check(throws(d2.view, x0.row(0), r), "bad input: Q2_K weight with Q8_0 activations -> InputError");
  cuda::GemvRows odd = r;
  odd.x_row = 128;
  check(throws(d2.view, xk.row(0), odd), "bad input: x_row not a multiple of the Q8_K block -> InputError");
  check(!throws(d2.view, xk.row(0), r), "good input: Q2_K with Q8_K activations runs");
  auto planes_throws = [&](const cuda::GemvRows& rr) {
    try {
      cuda::grouped_mma_int8_planes(d2.view, xk.row(0), y.as<float>(), rr, s);
    } catch (const InputError&) {
      return true;
    }
    return false;
  };
  cuda::GemvRows p16 = r;  // (idx_stride 16: counts past 8 would be dropped)
  p16.x_row = 512;
  check(planes_throws(p16), "bad input: planes with an index stride of 16 -> InputError");
  cuda::GemvRows pn = r;
  pn.idx_stride = 8;  // x_row 256 < two planes of 256
  check(planes_throws(pn), "bad input: planes with x_row below two planes -> InputError");
  auto dense_throws = [&](const WeightMatrix& w, const ActQ8View& x, int64_t x_row, int64_t n, cuda::DenseGroups g) {
    try {
      cuda::grouped_mma_int8_dense(w, x, x_row, y.as<float>(), 8, n, g, s);
    } catch (const InputError&) {
      return true;
    }
    return false;
  };
  check(dense_throws(df.view, xk.row(0), 256, 4, {}), "bad input: dense F32 weight -> InputError");
  check(dense_throws(d2.view, xk.row(0), 128, 4, {}), "bad input: dense x_row not a multiple of the block -> InputError");
  check(dense_throws(d2.view, xk.row(0), 256, 0, {}), "bad input: dense 0 rows -> InputError");
  check(dense_throws(d2.view, xk.row(0), 256, 4, {0, 0, 0, 0}), "bad input: dense 0 groups -> InputError");
  check(!dense_throws(d2.view, xk.row(0), 256, 4, {}), "good input: dense Q2_K with Q8_K activations runs");
  DS4_CUDA_CHECK(cudaStreamSynchronize(s));
}

}  // namespace

int main() {
  try {
    std::mt19937_64 rng(2212);
    cudaStream_t s;
    DS4_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    g_stream = s;
    const Shape shapes[] = {
        {DType::IQ2_XXS, 256, 1024},  // gate|up-like (2 x 128 rows, 4 super-blocks)
        {DType::IQ2_XXS, 200, 768},   // odd: a partial row tile, 3 super-blocks
        {DType::IQ2_XXS, 136, 1536},  // 6 super-blocks: the staged ring (4 stages) reuses its slots
        {DType::Q2_K, 256, 512},      // down-like
        {DType::Q2_K, 136, 768},      // odd
        {DType::Q2_K, 72, 1792},      // 7 super-blocks: slots reused
        {DType::Q8_0, 128, 512},
        {DType::Q8_0, 72, 384},       // odd: 3 K tiles (unstaged: cols % 256 != 0)
        {DType::Q8_0, 136, 1280},     // 5 stages: the staged ring (3 stages for Q8_0) reuses its slots
    };
    for (const Shape& sh : shapes)
      for (int64_t tokens : {1, 3, 8, 20, 64, 130, 256}) check_chunk(sh, tokens, false, rng, s);
    for (const Shape& sh : shapes) check_chunk(sh, 64, true, rng, s);
    for (const Shape& sh : shapes)
      if (sh.type != DType::Q8_0)
        for (int64_t tokens : {1, 5, 20, 130}) check_chunk(sh, tokens, false, rng, s, true);
    check_chunk(Shape{DType::Q2_K, 256, 512}, 64, true, rng, s, true);
    for (const Shape& sh : {Shape{DType::Q8_0, 136, 1280}, Shape{DType::Q8_0, 200, 512}, Shape{DType::Q8_0, 72, 384}})
      for (int groups : {1, 3})
        for (int64_t n : {1, 17, 64, 100, 300}) check_dense(sh, groups, n, rng, s);
    check_dense(Shape{DType::IQ2_XXS, 136, 768}, 2, 70, rng, s);
    check_dense(Shape{DType::Q2_K, 72, 512}, 2, 33, rng, s);
    check_bad_input(rng, s);
    std::printf(g_fail ? "%d FAILED\n" : "ALL PASSED\n", g_fail);
    return g_fail ? 1 : 0;
  } catch (const std::exception& e) {
    std::printf("FATAL: %s\n", e.what());
    return 1;
  }
}
