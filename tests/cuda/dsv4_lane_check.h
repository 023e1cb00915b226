#pragma once
// The chunk form of a compressor lane (compressor_chunk, lane_chunk.cu) against the row-by-row
// walk (compressor_walk) on the same random lane state and rows, BIT FOR BIT: memcmp of the
// whole entries buffer, the pending slots, the Ca half and the undo logs. At the Flash's lane
// shapes: the CSA lane (ratio 4, overlap, 512 features of a 1024-wide row, FP8 storage), the
// indexer's lane (ratio 4, overlap, 128 features, Hadamard + FP4 storage) and the HCA lane
// (ratio 128, no overlap); chunks from a window's start and from mid-window, spanning several
// windows, closing exactly one, shorter than one window (closing none), of one row, at
// positions past 8K; each with and without the undo log. Rows lie `stride` floats apart with
// stride > width (the chunk's per-row scratch), and the lane state starts random (an open
// window's slots, a previous window's Ca half), so every row source the chunk form reads is
// checked.
#include <cuda_runtime.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/check.h"
#include "models/deepseek_v4/cuda/kernels.h"
#include "test_common.h"

namespace ds4::cuda_test {

struct LaneShape {
  const char* name;
  int64_t ratio, dim, width, rope_dim;
  bool overlap, fp8, indexer_sim;
};

// One lane's device buffers, filled from host vectors (the same for both runs).
struct LaneBuffers {
  std::vector<void*> owned;
  float* up(const std::vector<float>& h) {
    void* d = nullptr;
    DS4_CUDA_CHECK(cudaMalloc(&d, std::max<size_t>(h.size(), 1) * 4));
    DS4_CUDA_CHECK(cudaMemcpy(d, h.data(), h.size() * 4, cudaMemcpyHostToDevice));
    owned.push_back(d);
    return static_cast<float*>(d);
  }
  ~LaneBuffers() {
    for (void* d : owned) cudaFree(d);
  }
};

inline std::vector<float> lane_download(const float* d, size_t n) {
  std::vector<float> h(n);
  DS4_CUDA_CHECK(cudaMemcpy(h.data(), d, n * 4, cudaMemcpyDeviceToHost));
  return h;
}

// Runs `rows` rows from position p0 on the walk and on the chunk form; each part memcmp'd.
inline void lane_case(const LaneShape& k, int64_t p0, int64_t rows, bool undo) {
  namespace dk = ds4::deepseek_v4::cuda;
  const int64_t R = k.ratio, D = k.dim, W = k.width, stride = W + 37;
  const int64_t n_entries = (p0 + rows) / R + 1;
  std::mt19937 rng(uint32_t(p0 * 1315423911u + rows * 2654435761u + R * 97 + D));
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  auto rnd = [&](size_t n, float amp) {
    std::vector<float> v(n);
    for (float& x : v) x = amp * u(rng);
    return v;
  };
  // gates of a few units (the softmax's weights differ), values around 1, plus a few large
  // values so the FP8 / FP4 round trips clip and scale
  const auto kv = rnd(size_t(rows * stride), 1.5f), gate = rnd(size_t(rows * stride), 4.f);
  const auto ape = rnd(size_t(R * W), 0.5f), norm = rnd(size_t(D), 1.f);
  const auto pend_kv = rnd(size_t(R * W), 1.5f), pend_gate = rnd(size_t(R * W), 4.f);
  const auto prev_kv = rnd(size_t(R * D), 1.5f), prev_gate = rnd(size_t(R * D), 4.f);
  const auto entries = rnd(size_t(n_entries * D), 1.f);
  // (the Ca half's log only with overlap: an HCA lane never writes it)
  const auto ukv = rnd(size_t(rows * W), 1.f), uprev = rnd(k.overlap ? size_t(rows * R * D) : 1, 1.f);
  std::vector<float> inv(size_t(k.rope_dim / 2));
  for (size_t i = 0; i < inv.size(); ++i) inv[i] = std::pow(10000.f, -2.f * float(i) / float(k.rope_dim));
  const int32_t pos = int32_t(p0);

  struct Out {
    std::vector<float> entries, pend_kv, pend_gate, prev_kv, prev_gate, ukv, ugate, upkv, upgate;
  };
  auto run = [&](bool chunk) {
    LaneBuffers b;
    dk::LaneArgs a{};
    a.kv = b.up(kv), a.gate = b.up(gate), a.ape = b.up(ape), a.norm = b.up(norm);
    a.pend_kv = b.up(pend_kv), a.pend_gate = b.up(pend_gate), a.prev_kv = b.up(prev_kv);
    a.prev_gate = b.up(prev_gate), a.entries = b.up(entries);
    a.ratio = R, a.dim = D, a.width = W, a.rope_dim = k.rope_dim;
    a.overlap = k.overlap, a.fp8 = k.fp8, a.indexer_sim = k.indexer_sim, a.eps = 1e-6f;
    a.inv_freq = b.up(inv);
    if (undo) a.undo_kv = b.up(ukv), a.undo_gate = b.up(ukv), a.undo_prev_kv = b.up(uprev), a.undo_prev_gate = b.up(uprev);
    const auto* dpos = reinterpret_cast<const int32_t*>(b.up({std::bit_cast<float>(pos)}));
    const dk::Rows rr{rows, stride};
    if (chunk)
      dk::compressor_chunk(a, dpos, nullptr, rr);
    else
      dk::compressor_walk(a, dpos, nullptr, rr);
    DS4_CUDA_CHECK(cudaDeviceSynchronize());
    Out o;
    o.entries = lane_download(a.entries, entries.size());
    o.pend_kv = lane_download(a.pend_kv, pend_kv.size()), o.pend_gate = lane_download(a.pend_gate, pend_gate.size());
    o.prev_kv = lane_download(a.prev_kv, prev_kv.size()), o.prev_gate = lane_download(a.prev_gate, prev_gate.size());
    if (undo) {
      o.ukv = lane_download(a.undo_kv, ukv.size()), o.ugate = lane_download(a.undo_gate, ukv.size());
      o.upkv = lane_download(a.undo_prev_kv, uprev.size()), o.upgate = lane_download(a.undo_prev_gate, uprev.size());
    }
    return o;
  };
  const Out w = run(false), c = run(true);
  auto same = [](const std::vector<float>& x, const std::vector<float>& y) {
    return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * 4) == 0;
  };
  // entries the rows close: (p0 + rows) / R - p0 / R (each also differs from its random start)
  const int64_t closed = (p0 + rows) / R - p0 / R;
  bool rewritten = true;
  for (int64_t e = p0 / R; e < (p0 + rows) / R; ++e)
    rewritten = rewritten && std::memcmp(w.entries.data() + e * D, entries.data() + e * D, size_t(D) * 4) != 0;
  std::string what = std::string("lane chunk form = walk, ") + k.name + ", p0 " + std::to_string(p0) + ", " +
                     std::to_string(rows) + " rows (" + std::to_string(closed) + " windows closed)" +
                     (undo ? ", undo log" : "") + ": ";
  const bool ok_e = same(w.entries, c.entries), ok_p = same(w.pend_kv, c.pend_kv) && same(w.pend_gate, c.pend_gate);
  const bool ok_c = same(w.prev_kv, c.prev_kv) && same(w.prev_gate, c.prev_gate);
  const bool ok_u = same(w.ukv, c.ukv) && same(w.ugate, c.ugate) && same(w.upkv, c.upkv) && same(w.upgate, c.upgate);
  what += std::string("entries ") + (ok_e ? "=" : "DIFFER") + ", pending " + (ok_p ? "=" : "DIFFER") + ", Ca half " +
          (ok_c ? "=" : "DIFFER") + (undo ? std::string(", undo log ") + (ok_u ? "=" : "DIFFER") : "") +
          (rewritten ? "" : ", a closed entry NOT written");
  check(ok_e && ok_p && ok_c && ok_u && rewritten, what);
}

inline void lane_chunk_shapes() {
  const LaneShape csa{"CSA lane (ratio 4, overlap, 512 of 1024)", 4, 512, 1024, 64, true, true, false};
  const LaneShape idx{"indexer lane (ratio 4, overlap, 128 of 256, FP4 sim)", 4, 128, 256, 64, true, false, true};
  const LaneShape hca{"HCA lane (ratio 128, 512)", 128, 512, 512, 64, false, true, false};
  struct Span {
    int64_t p0, rows;
  };
  for (bool undo : {false, true}) {
    // ratio 4: from 0 (the first window has no previous Ca half), mid-window, a chunk that
    // only closes its open window, one row, a long chunk past 8K
    for (const Span s : {Span{0, 2}, Span{0, 16}, Span{6, 1}, Span{6, 2}, Span{5, 3}, Span{3, 4}, Span{37, 7},
                         Span{37, 63}, Span{2, 512}, Span{8190, 512}})
      for (const LaneShape* k : {&csa, &idx}) lane_case(*k, s.p0, s.rows, undo);
    // ratio 128: shorter than a window (none closed), closing the open window only, several
    // windows from mid-window (the first pools rows from before the chunk), from a window start
    for (const Span s : {Span{100, 20}, Span{100, 28}, Span{37, 512}, Span{0, 128}, Span{8000, 300}, Span{255, 1}})
      lane_case(hca, s.p0, s.rows, undo);
  }
}

}  // namespace ds4::cuda_test
