#include "models/qwen_next/state.h"

#include "models/qwen_next/layers.h"

namespace ds4::qwen_next {

size_t RowCapture::bytes() const {
  return (conv0.size() + conv_in.size() + ssm.size() + ple_conv0.size() + ple_in.size()) * sizeof(float) +
         ple_ctx0.size() * sizeof(int32_t);
}

namespace {

// A state's bytes, its paged caches counted by paged(const PagedRows&).
template <class Paged>
size_t state_bytes(const State& s, Paged&& paged) {
  size_t b = s.mtp.count_bytes(paged) + (s.last_wide.size() + s.pending_wide.size()) * sizeof(float);
  for (const auto& l : s.layers) b += l.count_bytes(paged);
  return b;
}

}  // namespace

size_t State::bytes() const {
  return state_bytes(*this, [](const PagedRows& p) { return p.bytes(); });
}

size_t State::proportional_bytes() const {
  return state_bytes(*this, [](const PagedRows& p) { return p.proportional_bytes(); });
}

LayerState new_layer_state(const Config& c, int64_t l) {
  LayerState s;
  if (l >= 0 && c.is_linear[size_t(l)]) {
    s.conv.assign(size_t((c.conv_k - 1) * c.conv_dim()), 0.0f);
    s.ssm.assign(size_t(c.v_heads * c.k_dim * c.v_dim), 0.0f);
  }
  if (l >= 0 && c.ple_index(l) >= 0) {
    s.ple_ctx.assign(size_t(c.ngram - 1), c.eos);  // HF pads the missing history with EOS
    s.ple_conv.assign(size_t((c.ple_conv_k - 1) * c.ngram * c.wide()), 0.0f);
  }
  if (l < 0 || !c.is_linear[size_t(l)]) {  // QSA (the MTP head's layer, l < 0, is one)
    s.k = PagedRows(c.kv_heads * c.head_dim);
    s.v = PagedRows(c.kv_heads * c.head_dim);
    s.idx_raw = PagedRows(c.idx_dim);
    s.idx_pooled = PagedRows(c.idx_dim);
  }
  return s;
}

State make_state(const Config& c) {
  State s;
  for (int64_t l = 0; l < c.layers; ++l) s.layers.push_back(new_layer_state(c, l));
  s.mtp = new_layer_state(c, -1);
  return s;
}

}  // namespace ds4::qwen_next
