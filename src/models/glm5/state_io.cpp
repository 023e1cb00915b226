// GLM 5 state <-> named sections. One list (visit) drives both directions.
#include <type_traits>

#include "models/glm5/kda.h"
#include "models/glm5/state.h"

namespace ds4::glm5 {
namespace {

template <class IO, class S>
void visit(IO& io, S& s) {
  io.scalar("pos", s.pos);
  for (size_t i = 0; i < s.kda.size(); ++i) {
    const std::string p = "layer." + std::to_string(i) + ".";
    // KDA conv window and recurrent matrix have the model's fixed shapes (empty on DSA layers).
    io.vec(p + "kda.conv", s.kda[i].conv, true);
    io.vec(p + "kda.recurrent", s.kda[i].recurrent, true);
  }
  for (size_t i = 0; i < s.mla.size(); ++i) {
    const std::string p = "layer." + std::to_string(i) + ".";
    io.vec(p + "mla.latent", s.mla[i].latent);
    io.vec(p + "mla.idx_keys", s.mla[i].idx_keys);
    io.vec(p + "mla.idx_gates", s.mla[i].idx_gates);
    io.vec(p + "mla.pool_keys", s.mla[i].pool_keys);
  }
  io.flag("mtp.on", s.mtp_on);
  io.scalar("mtp.pos", s.mtp_pos);
  io.vec("mtp.kda.conv", s.mtp_kda.conv);
  io.vec("mtp.kda.recurrent", s.mtp_kda.recurrent);
  io.vec("mtp.mla.latent", s.mtp_mla.latent);
  io.vec("mtp.mla.idx_keys", s.mtp_mla.idx_keys);
  io.vec("mtp.mla.idx_gates", s.mtp_mla.idx_gates);
  io.vec("mtp.mla.pool_keys", s.mtp_mla.pool_keys);
  io.vec("mtp.last_hidden", s.last_hidden);
  io.vec("mtp.pending_hidden", s.pending_hidden);
  io.vec("mtp.pending_next", s.pending_next);
}

}  // namespace

State make_state(const Config& c) {
  State s;
  s.kda.resize(size_t(c.num_hidden_layers));
  s.mla.resize(size_t(c.num_hidden_layers));
  auto shape_mla = [&](MlaState& m) {
    m.latent = PagedRows(c.kv_lora_rank);
    m.idx_keys = PagedRows(c.index_head_dim);
    m.idx_gates = PagedRows(c.index_head_dim);
    m.pool_keys = PagedRows(c.index_head_dim);
  };
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    if (c.layer_types[size_t(l)] == LayerKind::kLinear)
      kda_init_state(c, s.kda[size_t(l)]);
    else
      shape_mla(s.mla[size_t(l)]);
  }
  shape_mla(s.mtp_mla);  // the MTP layer's kind is the weights' (mtp_enable shapes a KDA head)
  return s;
}

void State::save(std::vector<StateSection>& out) const {
  StateWriter w(out);
  visit(w, *this);
}

void State::load(const std::vector<StateSection>& in) {
  State fresh = read_state_sections("glm5", *this, in, [](auto& io, auto& st) { visit(io, st); });
  // Per-position rows: latent and indexer keys must hold exactly `pos` rows.
  for (size_t i = 0; i < fresh.mla.size(); ++i) {
    const auto& m = fresh.mla[i];
    for (auto [name, rows] : {std::pair{"latent", &m.latent}, {"idx_keys", &m.idx_keys}, {"idx_gates", &m.idx_gates}})
      require_rows("glm5", "layer." + std::to_string(i) + ".mla." + name, *rows, fresh.pos);
  }
  *this = std::move(fresh);
}

}  // namespace ds4::glm5
