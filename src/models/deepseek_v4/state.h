#pragma once
// Everything a DeepSeek V4 conversation accumulates, per layer. Plain vectors, so a copy
// is an exact snapshot (clone) and restoring is assigning it back.
#include <cstdint>
#include <memory>
#include <vector>

#include "models/model.h"

namespace ds4::deepseek_v4 {

// One compressor lane (the attention KV compressor, or the CSA indexer's key compressor).
// Tokens of the open window wait in `pend_*` until `ratio` of them close it; each closed
// window emits one entry. CSA lanes (width = 2 * dim) also keep the closed window's first
// half (Ca), which the next window's pooling reads (overlapping windows, stride ratio).
struct CompressorState {
  std::vector<float> pend_kv, pend_gate;  // {n_pend, width}; gate already has the position bias
  std::vector<float> prev_kv, prev_gate;  // {ratio, dim} Ca of the last closed window; empty = none
  std::vector<float> entries;             // {n_entries, dim}: normalized, rope'd at the window start
  int64_t n_entries = 0;
};

struct LayerState {
  std::vector<float> window;  // {n, head_dim}: the last (sliding_window - 1) rope'd KV rows, oldest first
  int64_t n_window = 0;
  CompressorState comp, index;
};

class State : public ModelState {
 public:
  std::unique_ptr<ModelState> clone() const override { return std::make_unique<State>(*this); }
  int64_t position() const override { return pos; }
  void save(std::vector<StateSection>& out) const override;  // state_io.cpp
  void load(const std::vector<StateSection>& in) override;
  size_t bytes() const override {
    size_t b = 0;
    auto lane = [](const CompressorState& c) {
      return (c.pend_kv.size() + c.pend_gate.size() + c.prev_kv.size() + c.prev_gate.size() + c.entries.size()) *
             sizeof(float);
    };
    for (const auto& l : layers) b += l.window.size() * sizeof(float) + lane(l.comp) + lane(l.index);
    return b + (mtp.window.size() + mtp_last_y.size()) * sizeof(float);
  }

  int64_t pos = 0;
  std::vector<LayerState> layers;
  // MTP draft head (mtp.cpp): its layer's sliding window over one row per consumed
  // position, and its output HC state {hc, hidden} for the last consumed token.
  bool mtp_on = false;
  LayerState mtp;
  std::vector<float> mtp_last_y;
};

}  // namespace ds4::deepseek_v4
