// CUDA Qwen3.8 Flash Next state <-> the CPU state's named sections (state_io.cpp): save copies
// the device caches into a host qwen_next::State (the first `pos` rows of each per-position
// cache, the MTP ring unrolled into the CPU's pending lists) and lets it write the sections;
// load reads a fresh host State (its reader checks every section), checks what the device
// can hold, and only then uploads it, so a refused checkpoint leaves the state as it was.
#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include "backend/cuda/paged_rows_io.h"
#include "core/error.h"
#include "models/qwen_next/cuda/model_impl.h"
#include "models/qwen_next/layers.h"
#include "models/qwen_next/state.h"

namespace ds4::qwen_next {
namespace {

// Element counts of one layer's caches at position `pos` (0 where the layer has none);
// l < 0: the MTP head's layer (QSA only, no PLE: its device part is MtpLayout::layer).
struct Counts {
  size_t conv = 0, ssm = 0, ple_ctx = 0, ple_conv = 0, kv = 0, idx_raw = 0, idx_pooled = 0;
};
Counts counts(const Config& c, int64_t l, int64_t pos) {
  Counts n;
  if (l >= 0 && c.is_linear[size_t(l)]) {
    n.conv = size_t((c.conv_k - 1) * c.conv_dim());
    n.ssm = size_t(c.v_heads * c.k_dim * c.v_dim);
  } else {
    n.kv = size_t(pos * c.kv_heads * c.head_dim);
    n.idx_raw = size_t(pos * c.idx_dim);
    n.idx_pooled = size_t(pos / c.idx_ratio * c.idx_dim);  // complete blocks only (qsa.cpp)
  }
  if (l >= 0 && c.ple_index(l) >= 0) {
    n.ple_ctx = size_t(c.ngram - 1);
    n.ple_conv = size_t((c.ple_conv_k - 1) * c.ngram * c.wide());
  }
  return n;
}

template <class T>
void down(const uint8_t* src, std::vector<T>& v, size_t n) {
  v.resize(n);
  if (n) DS4_CUDA_CHECK(cudaMemcpy(v.data(), src, n * sizeof(T), cudaMemcpyDeviceToHost));
}

// A paged host cache (core/paged_rows.h) from its device rows: n floats, whole rows.
void down(const uint8_t* src, PagedRows& v, size_t n) {
  ::ds4::cuda::paged_rows_from_device(src, v, n, "qwen_next cuda cache");
}

[[noreturn]] void refuse(const std::string& why) { throw InputError("qwen_next cuda checkpoint: " + why); }

// The host -> device copies of a load, each checked when added; run() only after every one
// was, so a refused checkpoint writes nothing.
class Uploads {
 public:
  template <class T>
  void add(uint8_t* dst, const std::vector<T>& v, size_t n, const std::string& what) {
    if (v.size() != n)
      refuse("section '" + what + "' holds " + std::to_string(v.size()) + " values, expected " + std::to_string(n));
    if (n) copies_.push_back({dst, v.data(), n * sizeof(T)});
  }
  // A paged cache: its rows flattened into a buffer this object keeps until run().
  void add(uint8_t* dst, const PagedRows& v, size_t n, const std::string& what) {
    flat_.push_back(v.flatten());
    add(dst, flat_.back(), n, what);
  }
  void run() const {
    for (const Copy& c : copies_) DS4_CUDA_CHECK(cudaMemcpy(c.dst, c.src, c.bytes, cudaMemcpyHostToDevice));
  }

 private:
  struct Copy {
    uint8_t* dst;
    const void* src;
    size_t bytes;
  };
  std::vector<Copy> copies_;
  std::vector<std::vector<float>> flat_;  // moving a vector keeps its buffer: copies_ stay valid
};

void check_tokens(const std::vector<int32_t>& t, int64_t vocab, const std::string& what) {
  for (int32_t x : t)
    if (x < 0 || x >= vocab) refuse("section '" + what + "' holds token " + std::to_string(x) + " outside the vocabulary");
}

}  // namespace

void CudaState::save(std::vector<StateSection>& out) const {
  // The window's rows are in the caches but not yet kept or dropped, and its device records
  // are no checkpoint section: a checkpoint of it could never be committed.
  if (!cap_tokens.empty())
    refuse("the state holds an uncommitted captured verify window of " + std::to_string(cap_tokens.size()) +
           " rows (commit_prefix first)");
  const Config& c = *c_;
  // The step runs on a non-blocking stream, which these legacy-stream copies do not wait for.
  DS4_CUDA_CHECK(cudaDeviceSynchronize());
  const uint8_t* base = buf.as<uint8_t>();
  State h = make_state(c);
  h.pos = pos;
  for (int64_t l = 0; l < c.layers; ++l) {
    const LayerOffsets& o = lay_->layers[size_t(l)];
    const Counts n = counts(c, l, pos);
    LayerState& s = h.layers[size_t(l)];
    down(base + o.conv, s.conv, n.conv);
    down(base + o.ssm, s.ssm, n.ssm);
    down(base + o.ple_conv, s.ple_conv, n.ple_conv);
    down(base + o.k, s.k, n.kv);
    down(base + o.v, s.v, n.kv);
    down(base + o.idx_raw, s.idx_raw, n.idx_raw);
    down(base + o.idx_pooled, s.idx_pooled, n.idx_pooled);
    if (n.ple_ctx) s.ple_ctx = ple_ctx[size_t(c.ple_index(l))];
  }
  // Without the head the device keeps no trunk rows, so last_wide stays empty (the CPU only
  // reads it for a draft, which needs the head on).
  if (mtp_on) {
    const MtpLayout& ml = *ml_;
    const uint8_t* mb = mtp.as<uint8_t>();
    const Counts n = counts(c, -1, mtp_pos);
    h.mtp_on = true;
    h.mtp_pos = mtp_pos;
    down(mb + ml.layer.k, h.mtp.k, n.kv);
    down(mb + ml.layer.v, h.mtp.v, n.kv);
    down(mb + ml.layer.idx_raw, h.mtp.idx_raw, n.idx_raw);
    down(mb + ml.layer.idx_pooled, h.mtp.idx_pooled, n.idx_pooled);
    if (pos > 0) {
      // Slot p % ring: row and token of position p. Pending pair i: row mtp_pos+i with the
      // token of position mtp_pos+i+1, for rows mtp_pos .. pos-2; last_wide: row pos-1.
      const int64_t W = c.wide(), R = ml.ring, P = pos - 1 - mtp_pos;
      DS4_CHECK(P >= 0 && P < R, "qwen_next cuda: MTP head position outside the ring's window");
      std::vector<float> rows;
      std::vector<int32_t> next;
      down(mb + ml.rows, rows, size_t(R * W));
      down(mb + ml.next, next, size_t(R));
      for (int64_t p = mtp_pos; p < pos - 1; ++p) {
        const float* r = rows.data() + (p % R) * W;
        h.pending_wide.insert(h.pending_wide.end(), r, r + W);
        h.pending_next.push_back(next[size_t((p + 1) % R)]);
      }
      const float* last = rows.data() + ((pos - 1) % R) * W;
      h.last_wide.assign(last, last + W);
    }
  }
  h.save(out);
}

void CudaState::load(const std::vector<StateSection>& in) {
  const Config& c = *c_;
  State h = make_state(c);  // fresh, shaped like the CPU model's new_state(), so its reader checks the sizes
  h.load(in);
  if (h.pos < 0 || h.pos > lay_->max_ctx)
    refuse("position " + std::to_string(h.pos) + " outside this state's context of " + std::to_string(lay_->max_ctx));
  const int64_t W = c.wide();
  std::vector<float> ring_rows;
  std::vector<int32_t> ring_next;
  if (h.mtp_on) {
    if (!ml_) refuse("MTP head sections, but this model has no MTP head on the GPU");
    const int64_t R = ml_->ring, P = int64_t(h.pending_next.size());
    // The device keeps rows mtp_pos .. pos-1 on distinct slots (a catch-up runs < ring rows);
    // a CPU state saved right after a long prefill holds more (it catches up only on a draft).
    if (P >= R)
      refuse(std::to_string(P) + " pending MTP rows > the device ring's " + std::to_string(R - 1) +
             " (draft once on the CPU before saving)");
    // Every consumed token after the first made one pair (consumed or pending).
    if (h.mtp_pos < 0 || h.mtp_pos + P != std::max<int64_t>(h.pos - 1, 0))
      refuse("mtp.pos " + std::to_string(h.mtp_pos) + " + " + std::to_string(P) + " pending pairs != position " +
             std::to_string(h.pos) + " - 1");
    if (h.pending_wide.size() != size_t(P * W))
      refuse("section 'mtp.pending_wide' holds " + std::to_string(h.pending_wide.size()) + " floats, expected " +
             std::to_string(P * W));
    if (h.last_wide.size() != size_t(h.pos > 0 ? W : 0))
      refuse("section 'mtp.last_wide' holds " + std::to_string(h.last_wide.size()) + " floats");
    if (!h.mtp.conv.empty() || !h.mtp.ssm.empty() || !h.mtp.ple_ctx.empty() || !h.mtp.ple_conv.empty())
      refuse("the MTP head's layer is attention only (no conv, ssm or PLE sections)");
    check_tokens(h.pending_next, c.vocab, "mtp.pending_next");
    ring_rows.assign(size_t(R * W), 0.f);
    ring_next.assign(size_t(R), 0);
    for (int64_t i = 0; i < P; ++i) {  // pair i: row at slot mtp_pos+i, token at slot mtp_pos+i+1
      const int64_t p = h.mtp_pos + i;
      std::copy_n(h.pending_wide.data() + i * W, W, ring_rows.data() + (p % R) * W);
      ring_next[size_t((p + 1) % R)] = h.pending_next[size_t(i)];
    }
    if (h.pos > 0) std::copy_n(h.last_wide.data(), W, ring_rows.data() + ((h.pos - 1) % R) * W);
  }
  for (int64_t l = 0; l < c.layers; ++l)
    check_tokens(h.layers[size_t(l)].ple_ctx, c.vocab, "layer." + std::to_string(l) + ".ple_ctx");

  // A state loaded with the head on needs its buffer (made here, adopted only after the copies).
  dc::DeviceBuffer fresh;
  if (h.mtp_on && !mtp.bytes()) {
    fresh = dc::DeviceBuffer(ml_->bytes, "qwen_next MTP state (head caches, trunk rows)");
    DS4_CUDA_CHECK(cudaMemset(fresh.get(), 0, ml_->bytes));
  }
  Uploads up;
  uint8_t* base = buf.as<uint8_t>();
  for (int64_t l = 0; l < c.layers; ++l) {
    const LayerOffsets& o = lay_->layers[size_t(l)];
    const Counts n = counts(c, l, h.pos);
    const LayerState& s = h.layers[size_t(l)];
    const std::string p = "layer." + std::to_string(l) + ".";
    up.add(base + o.conv, s.conv, n.conv, p + "conv");
    up.add(base + o.ssm, s.ssm, n.ssm, p + "ssm");
    up.add(base + o.ple_conv, s.ple_conv, n.ple_conv, p + "ple_conv");
    up.add(base + o.k, s.k, n.kv, p + "k");
    up.add(base + o.v, s.v, n.kv, p + "v");
    up.add(base + o.idx_raw, s.idx_raw, n.idx_raw, p + "idx_raw");
    up.add(base + o.idx_pooled, s.idx_pooled, n.idx_pooled, p + "idx_pooled");
    if (s.ple_ctx.size() != n.ple_ctx) refuse("section '" + p + "ple_ctx' has the wrong size");
  }
  // The device position counters (int32), kept alive until run().
  const std::vector<int32_t> trunk_pos{int32_t(h.pos)}, head_pos{int32_t(h.mtp_pos)};
  up.add(base + lay_->pos, trunk_pos, 1, "pos");
  if (h.mtp_on) {
    const MtpLayout& ml = *ml_;
    uint8_t* mb = fresh.bytes() ? fresh.as<uint8_t>() : mtp.as<uint8_t>();
    const Counts n = counts(c, -1, h.mtp_pos);
    up.add(mb + ml.layer.k, h.mtp.k, n.kv, "mtp.k");
    up.add(mb + ml.layer.v, h.mtp.v, n.kv, "mtp.v");
    up.add(mb + ml.layer.idx_raw, h.mtp.idx_raw, n.idx_raw, "mtp.idx_raw");
    up.add(mb + ml.layer.idx_pooled, h.mtp.idx_pooled, n.idx_pooled, "mtp.idx_pooled");
    up.add(mb + ml.rows, ring_rows, ring_rows.size(), "mtp ring rows");
    up.add(mb + ml.next, ring_next, ring_next.size(), "mtp ring tokens");
    up.add(mb + ml.pos, head_pos, 1, "mtp.pos");
  }
  DS4_CUDA_CHECK(cudaDeviceSynchronize());  // nothing of the non-blocking step stream still in flight
  up.run();
  DS4_CUDA_CHECK(cudaDeviceSynchronize());  // pageable copies may return before the DMA lands
  pos = h.pos;
  for (int64_t l = 0; l < c.layers; ++l)
    if (c.ple_index(l) >= 0) ple_ctx[size_t(c.ple_index(l))] = h.layers[size_t(l)].ple_ctx;
  // The trunk's graphs (step and chunks) hold only this buffer's addresses and read the
  // position from its device counter, so they stay valid. The head's graphs hold its
  // buffer's addresses: dropped when that buffer is made or freed here.
  if (fresh.bytes() || (!h.mtp_on && mtp.bytes())) {
    for (auto& g : mtp_graph)
      if (g) cudaGraphExecDestroy(g), g = nullptr;
    mtp = std::move(fresh);  // empty when the checkpoint has no head: its buffer is freed
  }
  mtp_on = h.mtp_on;
  mtp_pos = h.mtp_on ? h.mtp_pos : 0;
  // Any window this state captured before is gone with its rows.
  cap_tokens.clear();
  cap_ple_ctx0.clear();
}

}  // namespace ds4::qwen_next
