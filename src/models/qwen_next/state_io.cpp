// Qwen Next state <-> named sections. One list (visit) drives both directions.
#include <type_traits>

#include "models/qwen_next/state.h"

namespace ds4::qwen_next {
namespace {

// Fixed-size members (conv, ssm, PLE history) keep the fresh state's size exactly; the
// KV and indexer rows grow with the position.
template <class IO, class L>
void visit_layer(IO& io, const std::string& p, L& l) {
  io.vec(p + "conv", l.conv, true);
  io.vec(p + "ssm", l.ssm, true);
  io.vec(p + "ple_ctx", l.ple_ctx, true);
  io.vec(p + "ple_conv", l.ple_conv, true);
  io.vec(p + "k", l.k);
  io.vec(p + "v", l.v);
  io.vec(p + "idx_raw", l.idx_raw);
  io.vec(p + "idx_pooled", l.idx_pooled);
}

template <class IO, class S>
void visit(IO& io, S& s) {
  io.scalar("pos", s.pos);
  for (size_t i = 0; i < s.layers.size(); ++i) visit_layer(io, "layer." + std::to_string(i) + ".", s.layers[i]);
  io.flag("mtp.on", s.mtp_on);
  // The MTP head's layer is used only once enabled, so none of its vectors is fixed-size.
  for (auto [name, v] : {std::pair{"k", &s.mtp.k}, {"v", &s.mtp.v}, {"idx_raw", &s.mtp.idx_raw},
                         {"idx_pooled", &s.mtp.idx_pooled}})
    io.vec(std::string("mtp.") + name, *v);
  for (auto [name, v] : {std::pair{"conv", &s.mtp.conv}, {"ssm", &s.mtp.ssm}, {"ple_conv", &s.mtp.ple_conv}})
    io.vec(std::string("mtp.") + name, *v);
  io.vec("mtp.ple_ctx", s.mtp.ple_ctx);
  io.scalar("mtp.pos", s.mtp_pos);
  io.vec("mtp.last_wide", s.last_wide);
  io.vec("mtp.pending_wide", s.pending_wide);
  io.vec("mtp.pending_next", s.pending_next);
}

}  // namespace

void State::save(std::vector<StateSection>& out) const {
  StateWriter w(out);
  visit(w, *this);
}

void State::load(const std::vector<StateSection>& in) {
  State fresh = read_state_sections("qwen_next", *this, in, [](auto& io, auto& st) { visit(io, st); });
  // Attention rows are one per position, and K and V agree.
  for (size_t i = 0; i < fresh.layers.size(); ++i) {
    const auto& l = fresh.layers[i];
    const std::string p = "layer." + std::to_string(i) + ".";
    for (auto [name, rows] : {std::pair{"k", &l.k}, {"v", &l.v}, {"idx_raw", &l.idx_raw}})
      require_rows("qwen_next", p + name, *rows, fresh.pos);
    if (l.k.rows() != l.v.rows())
      throw InputError("qwen_next checkpoint: section '" + p + "v' holds " + std::to_string(l.v.rows()) +
                       " rows, '" + p + "k' " + std::to_string(l.k.rows()));
  }
  *this = std::move(fresh);
}

}  // namespace ds4::qwen_next
