// CUDA DeepSeek V4 state <-> the CPU state's named sections (state_io.cpp): save copies the
// device caches into a host deepseek_v4::State and lets it write the sections; load reads a
// fresh host State (its reader checks the section list and row counts), checks every size
// against what the position implies, and only then uploads it. The layouts differ only in
// where rows sit:
//   window ring   device: position p at slot p % ring_rows (window + kRingSlack slots);
//                 CPU: the last min(pos, window - 1) rows, oldest first
//   lanes         the open window's pos % ratio rows at slots 0.. on both; the Ca half
//                 (CSA lanes) once a window has closed; entries {pos / ratio, dim}
//   MTP head      its layer's ring as the trunk's (it runs at the trunk's positions from
//                 position 0), mtp_y = mtp_last_y (empty before the first forward)
//   DSpark        per stage a ring like the trunk's; the CPU keeps min(pos, window) rows
#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include "backend/cuda/paged_rows_io.h"
#include "core/error.h"
#include "models/deepseek_v4/cuda/model_impl.h"
#include "models/deepseek_v4/state.h"

namespace ds4::deepseek_v4 {
namespace {

[[noreturn]] void refuse(const std::string& why) { throw InputError("deepseek_v4 cuda checkpoint: " + why); }

void down(const uint8_t* base, size_t off, std::vector<float>& v, size_t n) {
  v.resize(n);
  if (n) DS4_CUDA_CHECK(cudaMemcpy(v.data(), base + off, n * sizeof(float), cudaMemcpyDeviceToHost));
}

void up(uint8_t* base, size_t off, const std::vector<float>& v) {
  if (!v.empty()) DS4_CUDA_CHECK(cudaMemcpy(base + off, v.data(), v.size() * sizeof(float), cudaMemcpyHostToDevice));
}

// A lane's paged entries (core/paged_rows.h) from / to their device rows: n floats, whole rows.
void down(const uint8_t* base, size_t off, PagedRows& v, size_t n) {
  ::ds4::cuda::paged_rows_from_device(base + off, v, n, "deepseek_v4 cuda entries");
}

void up(uint8_t* base, size_t off, const PagedRows& v) { up(base, off, v.flatten()); }

void expect(const std::string& name, size_t got, size_t want) {
  if (got != want)
    refuse("section '" + name + "' holds " + std::to_string(got) + " floats, this position needs " +
           std::to_string(want));
}

void expect_n(const std::string& name, int64_t got, int64_t want) {
  if (got != want) refuse("section '" + name + "' is " + std::to_string(got) + ", this position needs " + std::to_string(want));
}

// A position-indexed ring {ring_rows, hd} <-> the last n positions' rows {n, hd}, oldest first.
struct Ring {
  int64_t ring_rows, hd;
  void to_rows(const std::vector<float>& ring, int64_t pos, int64_t n, std::vector<float>& rows) const {
    rows.resize(size_t(n * hd));
    for (int64_t r = 0; r < n; ++r) {
      const int64_t slot = (pos - n + r) % ring_rows;
      std::copy_n(ring.begin() + slot * hd, hd, rows.begin() + r * hd);
    }
  }
  // Slots of older positions stay zero: no kernel reads a position outside the window.
  std::vector<float> from_rows(const std::vector<float>& rows, int64_t pos, int64_t n) const {
    std::vector<float> ring(size_t(ring_rows * hd), 0.0f);
    for (int64_t r = 0; r < n; ++r) {
      const int64_t slot = (pos - n + r) % ring_rows;
      std::copy_n(rows.begin() + r * hd, hd, ring.begin() + slot * hd);
    }
    return ring;
  }
};

// One compressor lane's shapes at `pos` (CPU compressor.cpp: append_rows / close_window).
struct LaneShape {
  int64_t ratio = 0, dim = 0, width = 0;
  bool overlap = false;
  size_t pend(int64_t pos) const { return size_t(pos % ratio * width); }
  size_t prev(int64_t pos) const { return overlap && pos >= ratio ? size_t(ratio * dim) : 0; }
  int64_t entries(int64_t pos) const { return pos / ratio; }
};

void lane_down(const uint8_t* base, const LaneOffsets& o, const LaneShape& ls, int64_t pos, CompressorState& s) {
  down(base, o.pend_kv, s.pend_kv, ls.pend(pos));
  down(base, o.pend_gate, s.pend_gate, ls.pend(pos));
  down(base, o.prev_kv, s.prev_kv, ls.prev(pos));
  down(base, o.prev_gate, s.prev_gate, ls.prev(pos));
  s.n_entries = ls.entries(pos);
  down(base, o.entries, s.entries, size_t(s.n_entries * ls.dim));
}

// A lane the layer does not have (ratio 0, or the index lane of an HCA layer) is all empty.
void lane_check(const std::string& p, const LaneShape* ls, int64_t pos, const CompressorState& s) {
  const size_t pend = ls ? ls->pend(pos) : 0, prev = ls ? ls->prev(pos) : 0;
  const int64_t n = ls ? ls->entries(pos) : 0;
  expect(p + "pend_kv", s.pend_kv.size(), pend);
  expect(p + "pend_gate", s.pend_gate.size(), pend);
  expect(p + "prev_kv", s.prev_kv.size(), prev);
  expect(p + "prev_gate", s.prev_gate.size(), prev);
  expect_n(p + "n_entries", s.n_entries, n);
  expect(p + "entries", size_t(s.entries.rows() * s.entries.width()), size_t(n * (ls ? ls->dim : 0)));
}

void lane_up(uint8_t* base, const LaneOffsets& o, const CompressorState& s) {
  up(base, o.pend_kv, s.pend_kv);
  up(base, o.pend_gate, s.pend_gate);
  up(base, o.prev_kv, s.prev_kv);
  up(base, o.prev_gate, s.prev_gate);
  up(base, o.entries, s.entries);
}

// The layer's lanes (comp, index); has_* false where it has none (step_layout.h state_layout).
struct Lanes {
  LaneShape comp, index;
  bool has_comp = false, has_index = false;
};
Lanes lanes(const Config& c, int64_t l) {
  Lanes n;
  const int64_t ratio = c.ratio(l);
  if (ratio <= 0) return n;
  const bool csa = c.attn_types[size_t(l)] == AttnType::kCompressedSparse;
  n.has_comp = true;
  n.comp = LaneShape{ratio, c.head_dim, csa ? 2 * c.head_dim : c.head_dim, csa};
  n.has_index = csa;
  n.index = LaneShape{ratio, c.index_dim, 2 * c.index_dim, true};
  return n;
}

}  // namespace

void CudaState::save(std::vector<StateSection>& out) const {
  // The undo log of a pending window lives in the state's capture buffer, not in the sections: a state saved
  // before commit_prefix could never be cut back to the kept prefix.
  if (cap_rows > 0) throw Error("deepseek_v4 cuda: save with an uncommitted captured verify window");
  const Config& c = *c_;
  const StateLayout& lay = *lay_;
  const Ring ring{lay.ring_rows, c.head_dim};
  const uint8_t* base = buf.as<uint8_t>();
  DS4_CUDA_CHECK(cudaDeviceSynchronize());  // the step's non-blocking stream: the legacy copies do not wait for it
  State h = make_state(c);
  h.pos = pos;
  std::vector<float> r;
  const int64_t nw = std::min<int64_t>(pos, c.window - 1);
  for (int64_t l = 0; l < c.layers; ++l) {
    const LayerOffsets& o = lay.layers[size_t(l)];
    LayerState& s = h.layers[size_t(l)];
    down(base, o.window, r, size_t(ring.ring_rows * ring.hd));
    ring.to_rows(r, pos, nw, s.window);
    s.n_window = nw;
    const Lanes ln = lanes(c, l);
    if (ln.has_comp) lane_down(base, o.comp, ln.comp, pos, s.comp);
    if (ln.has_index) lane_down(base, o.index, ln.index, pos, s.index);
  }
  if (mtp_on) {
    h.mtp_on = true;
    down(base, lay.layers[size_t(c.layers)].window, r, size_t(ring.ring_rows * ring.hd));
    ring.to_rows(r, pos, nw, h.mtp.window);
    h.mtp.n_window = nw;
    down(base, lay.mtp_y, h.mtp_last_y, pos > 0 ? size_t(c.hc * c.hidden) : 0);
  }
  if (dspark_on) {
    h.dspark_on = true;
    h.dspark_n = std::min<int64_t>(pos, c.window);
    h.dspark_ring.resize(lay.dspark_ring.size());
    for (size_t s = 0; s < lay.dspark_ring.size(); ++s) {
      down(base, lay.dspark_ring[s], r, size_t(ring.ring_rows * ring.hd));
      ring.to_rows(r, pos, h.dspark_n, h.dspark_ring[s]);
    }
  }
  h.save(out);
}

void CudaState::load(const std::vector<StateSection>& in) {
  const Config& c = *c_;
  const StateLayout& lay = *lay_;
  const Ring ring{lay.ring_rows, c.head_dim};
  State h = make_state(c);  // shaped like the CPU model's new_state(), so its reader checks the section list
  h.load(in);
  // Everything is checked before the first write: a refused checkpoint leaves this state as it was.
  const int64_t p = h.pos;
  if (p < 0 || p > lay.max_ctx)
    refuse("position " + std::to_string(p) + " outside this state's context of " + std::to_string(lay.max_ctx));
  const int64_t nw = std::min<int64_t>(p, c.window - 1), hd = c.head_dim;
  for (int64_t l = 0; l < c.layers; ++l) {
    const LayerState& s = h.layers[size_t(l)];
    const std::string pre = "layer." + std::to_string(l) + ".";
    expect_n(pre + "n_window", s.n_window, nw);
    expect(pre + "window", s.window.size(), size_t(nw * hd));
    const Lanes ln = lanes(c, l);
    lane_check(pre + "comp.", ln.has_comp ? &ln.comp : nullptr, p, s.comp);
    lane_check(pre + "index.", ln.has_index ? &ln.index : nullptr, p, s.index);
  }
  const bool has_mtp_layer = lay.layers.size() > size_t(c.layers);
  if (h.mtp_on) {
    if (!has_mtp_layer) refuse("MTP head sections (mtp.on), but this model has no MTP head on the GPU");
    expect_n("mtp.n_window", h.mtp.n_window, nw);
    expect("mtp.window", h.mtp.window.size(), size_t(nw * hd));
    expect("mtp.last_y", h.mtp_last_y.size(), p > 0 ? size_t(c.hc * c.hidden) : 0);
  } else {
    expect_n("mtp.n_window", h.mtp.n_window, 0);
    expect("mtp.window", h.mtp.window.size(), 0);
    expect("mtp.last_y", h.mtp_last_y.size(), 0);
  }
  if (h.dspark_on) {
    if (lay.dspark_ring.size() != h.dspark_ring.size())
      refuse("DSpark ring sections, but this model has no DSpark drafter on the GPU");
    const int64_t dn = std::min<int64_t>(p, c.window);
    expect_n("dspark.n", h.dspark_n, dn);
    for (size_t s = 0; s < h.dspark_ring.size(); ++s)
      expect("dspark.ring." + std::to_string(s), h.dspark_ring[s].size(), size_t(dn * hd));
  }

  uint8_t* base = buf.as<uint8_t>();
  DS4_CUDA_CHECK(cudaDeviceSynchronize());  // nothing of this state's earlier work still in flight
  for (int64_t l = 0; l < c.layers; ++l) {
    const LayerOffsets& o = lay.layers[size_t(l)];
    const LayerState& s = h.layers[size_t(l)];
    up(base, o.window, ring.from_rows(s.window, p, nw));
    const Lanes ln = lanes(c, l);
    if (ln.has_comp) lane_up(base, o.comp, s.comp);
    if (ln.has_index) lane_up(base, o.index, s.index);
  }
  if (h.mtp_on) {
    up(base, lay.layers[size_t(c.layers)].window, ring.from_rows(h.mtp.window, p, nw));
    up(base, lay.mtp_y, h.mtp_last_y);
  }
  if (h.dspark_on)
    for (size_t s = 0; s < h.dspark_ring.size(); ++s)
      up(base, lay.dspark_ring[s], ring.from_rows(h.dspark_ring[s], p, h.dspark_n));
  const int32_t p32 = int32_t(p);
  DS4_CUDA_CHECK(cudaMemcpy(base + lay.pos, &p32, sizeof p32, cudaMemcpyHostToDevice));
  DS4_CUDA_CHECK(cudaDeviceSynchronize());  // pageable copies may return before the DMA lands
  pos = p;
  cap_rows = 0;  // a pending window's undo log no longer describes this buffer
  // The graphs hold this buffer's addresses (unchanged) and read the position from its
  // counter; what they bake in from the host is whether the heads record.
  if (mtp_on != h.mtp_on || dspark_on != h.dspark_on) {
    mtp_on = h.mtp_on;
    dspark_on = h.dspark_on;
    drop_graphs();
  }
}

}  // namespace ds4::deepseek_v4
