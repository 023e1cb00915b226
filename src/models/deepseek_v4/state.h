#pragma once
// Everything a DeepSeek V4 conversation accumulates, per layer. Plain vectors, so a copy
// is an exact snapshot (clone) and restoring is assigning it back.
#include <cstdint>
#include <memory>
#include <vector>

#include "core/paged_rows.h"
#include "models/model.h"

namespace ds4::deepseek_v4 {

// One compressor lane (the attention KV compressor, or the CSA indexer's key compressor).
// Tokens of the open window wait in `pend_*` until `ratio` of them close it; each closed
// window emits one entry. CSA lanes (width = 2 * dim) also keep the closed window's first
// half (Ca), which the next window's pooling reads (overlapping windows, stride ratio).
struct CompressorState {
  std::vector<float> pend_kv, pend_gate;  // {n_pend, width}; gate already has the position bias
  std::vector<float> prev_kv, prev_gate;  // {ratio, dim} Ca of the last closed window; empty = none
  PagedRows entries;  // {n_entries, dim}: normalized, rope'd at the window start; paged (a clone shares blocks)
  int64_t n_entries = 0;
};

// A compressor lane during a captured verify window (spec_commit.cpp): its open window and
// Ca half before the window, and the rows the window pushed ({n, width}; gate with the
// position bias), from which any kept prefix's lane follows without pooling again.
struct LaneCapture {
  CompressorState before;  // entries left empty: the entries themselves are only truncated
  std::vector<float> kv, gate;
};

// What a layer records during a captured verify window.
struct LayerCapture {
  bool on = false;
  std::vector<float> window0, rows;  // sliding window before; the window's rope'd KV rows {n, head_dim}
  int64_t n_window0 = 0;
  LaneCapture comp, index;
};

struct LayerState {
  std::vector<float> window;  // {n, head_dim}: the last (sliding_window - 1) rope'd KV rows, oldest first
  int64_t n_window = 0;
  CompressorState comp, index;
  LayerCapture cap;           // verify window being captured (speculative decoding)
};

class State : public ModelState {
 public:
  std::unique_ptr<ModelState> clone() const override { return std::make_unique<State>(*this); }
  int64_t position() const override { return pos; }
  void save(std::vector<StateSection>& out) const override;  // state_io.cpp
  void load(const std::vector<StateSection>& in) override;
  size_t bytes() const override { return count_bytes([](const PagedRows& p) { return p.bytes(); }); }
  size_t proportional_bytes() const override {
    return count_bytes([](const PagedRows& p) { return p.proportional_bytes(); });
  }
  // Every buffer's bytes, the paged caches counted by paged(const PagedRows&).
  template <class Paged>
  size_t count_bytes(Paged&& paged) const {
    size_t b = 0;
    auto lane = [&](const CompressorState& c) {
      return (c.pend_kv.size() + c.pend_gate.size() + c.prev_kv.size() + c.prev_gate.size()) * sizeof(float) +
             paged(c.entries);
    };
    for (const auto& l : layers) b += l.window.size() * sizeof(float) + lane(l.comp) + lane(l.index);
    for (const auto& r : dspark_ring) b += r.size() * sizeof(float);
    return b + (mtp.window.size() + mtp_last_y.size()) * sizeof(float);
  }

  int64_t pos = 0;
  std::vector<LayerState> layers;
  // MTP draft head (mtp.cpp): its layer's sliding window over one row per consumed
  // position, and its output HC state {hc, hidden} for the last consumed token.
  bool mtp_on = false;
  LayerState mtp;
  std::vector<float> mtp_last_y;
  // DSpark drafter (dspark.cpp): per stage the rope'd K/V rows of the last `window` consumed
  // positions ({dspark_n, head_dim}, oldest first), built from the fused trunk taps.
  bool dspark_on = false;
  std::vector<std::vector<float>> dspark_ring;
  int64_t dspark_n = 0;
  // Captured verify window awaiting commit_prefix (spec_commit.cpp): its tokens, the MTP
  // head's output HC rows {n, hc, hidden}, the DSpark rings before it and their new rows
  // per stage {n, head_dim}.
  bool cap_on = false;
  std::vector<int32_t> cap_tokens;
  std::vector<float> cap_mtp_y;
  std::vector<std::vector<float>> cap_ring0, cap_ring_rows;
  int64_t cap_dspark_n0 = 0;
};

struct Config;
// A fresh state shaped for the config (a layer per trunk layer, the lanes' entry widths: KV
// head_dim, indexer index_dim): the CPU model's new_state() and the CUDA state's host copy for
// checkpoints (state_io.cpp).
State make_state(const Config& c);

}  // namespace ds4::deepseek_v4
