// DeepSeek V4 state <-> named sections. One list (visit) drives both directions.
#include "models/deepseek_v4/state.h"

#include <algorithm>
#include <type_traits>

#include "models/deepseek_v4/config.h"

namespace ds4::deepseek_v4 {
namespace {

template <class IO, class C>
void visit_lane(IO& io, const std::string& p, C& c) {
  io.vec(p + "pend_kv", c.pend_kv);
  io.vec(p + "pend_gate", c.pend_gate);
  io.vec(p + "prev_kv", c.prev_kv);
  io.vec(p + "prev_gate", c.prev_gate);
  io.vec(p + "entries", c.entries);
  io.scalar(p + "n_entries", c.n_entries);
}

// DSpark sections exist only for states with the drafter on, so checkpoints written
// before (or without) DSpark keep their exact section list.
template <class IO, class S>
void visit(IO& io, S& s, bool dspark) {
  io.scalar("pos", s.pos);
  for (size_t i = 0; i < s.layers.size(); ++i) {
    const std::string p = "layer." + std::to_string(i) + ".";
    io.vec(p + "window", s.layers[i].window);
    io.scalar(p + "n_window", s.layers[i].n_window);
    visit_lane(io, p + "comp.", s.layers[i].comp);
    visit_lane(io, p + "index.", s.layers[i].index);
  }
  io.flag("mtp.on", s.mtp_on);
  io.vec("mtp.window", s.mtp.window);
  io.scalar("mtp.n_window", s.mtp.n_window);
  io.vec("mtp.last_y", s.mtp_last_y);
  if constexpr (!std::is_const_v<S>) {  // a checkpoint without rings turns the drafter off
    s.dspark_on = dspark;
    s.dspark_ring.resize(dspark ? 3 : 0);
    if (!dspark) s.dspark_n = 0;
  }
  if (!dspark) return;
  for (size_t i = 0; i < s.dspark_ring.size(); ++i) io.vec("dspark.ring." + std::to_string(i), s.dspark_ring[i]);
  io.scalar("dspark.n", s.dspark_n);
}

// Row counts must agree with the stored row data, or the forward would read past it.
void check_rows(const std::string& name, size_t elems, int64_t rows) {
  if (rows < 0 || (rows == 0) != (elems == 0) || (rows > 0 && elems % size_t(rows) != 0))
    throw InputError("deepseek_v4 checkpoint: section '" + name + "' holds " + std::to_string(elems) +
                     " floats for " + std::to_string(rows) + " rows");
}

// A lane's entries: exactly its n_entries rows (the reader already checked whole rows).
void check_entries(const std::string& name, const PagedRows& entries, int64_t n_entries) {
  if (entries.rows() != n_entries)
    throw InputError("deepseek_v4 checkpoint: section '" + name + "' holds " + std::to_string(entries.rows()) +
                     " rows for n_entries " + std::to_string(n_entries));
}

}  // namespace

State make_state(const Config& c) {
  State s;
  s.layers.resize(size_t(c.layers));
  auto shape = [&](LayerState& l) {
    l.comp.entries = PagedRows(c.head_dim);
    l.index.entries = PagedRows(c.index_dim);
  };
  for (LayerState& l : s.layers) shape(l);
  shape(s.mtp);
  return s;
}

void State::save(std::vector<StateSection>& out) const {
  StateWriter w(out);
  visit(w, *this, dspark_on);
}

void State::load(const std::vector<StateSection>& in) {
  const bool dspark = std::any_of(in.begin(), in.end(), [](const StateSection& x) { return x.name == "dspark.n"; });
  State fresh = read_state_sections("deepseek_v4", *this, in, [&](auto& io, auto& st) { visit(io, st, dspark); });
  for (size_t i = 0; i < fresh.layers.size(); ++i) {
    const auto& l = fresh.layers[i];
    const std::string p = "layer." + std::to_string(i) + ".";
    check_rows(p + "window", l.window.size(), l.n_window);
    check_entries(p + "comp.entries", l.comp.entries, l.comp.n_entries);
    check_entries(p + "index.entries", l.index.entries, l.index.n_entries);
  }
  check_rows("mtp.window", fresh.mtp.window.size(), fresh.mtp.n_window);
  for (size_t i = 0; i < fresh.dspark_ring.size(); ++i)
    check_rows("dspark.ring." + std::to_string(i), fresh.dspark_ring[i].size(), fresh.dspark_n);
  *this = std::move(fresh);
}

}  // namespace ds4::deepseek_v4
