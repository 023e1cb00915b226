// The forward pass: embedding -> hc-wide residual -> decoder layers -> final mixer ->
// lm_head, plus the MTP draft head that reuses the decoder layer.
#include <algorithm>
#include <vector>

#include "backend/cpu/norm.h"
#include "backend/cpu/rope.h"
#include "core/error.h"
#include "models/batch_rows.h"
#include "models/qwen_next/layers.h"
#include "models/qwen_next/model.h"

namespace ds4::qwen_next {
namespace {

// One decoder layer over the rows of several sequences (layers.h SeqRows) of the widened
// stream h {rows, hc*d}. Everything but PLE and the token mixer is row-wise.
void decoder_layer_seqs(const Ctx& x, const LayerWeights& w, std::span<const SeqRows> seqs, float* h) {
  const Config& c = x.c;
  const int64_t n = total_rows(seqs);
  std::vector<float> mixed(size_t(n * c.hidden)), out(size_t(n * c.hidden)), inject(size_t(n * c.hc));
  if (w.ple) ple_forward_seqs(x, *w.ple, seqs, h);
  hyper_read(x, w.attn_hc, h, n, mixed.data(), inject.data());
  if (w.gdn) gdn_forward_seqs(x, *w.gdn, seqs, mixed.data(), out.data());
  else qsa_forward_seqs(x, *w.qsa, seqs, mixed.data(), out.data());
  hyper_write(x, h, out.data(), inject.data(), n);
  hyper_read(x, w.mlp_hc, h, n, mixed.data(), inject.data());
  moe_forward(x, w.moe, mixed.data(), n, out.data());
  hyper_write(x, h, out.data(), inject.data(), n);
}

// One decoder layer over n rows of one sequence at positions pos0...
void decoder_layer(const Ctx& x, const LayerWeights& w, LayerState& s, int64_t pos0, const int32_t* tokens,
                   float* h, int64_t n) {
  const SeqRows one{&s, pos0, n, tokens};
  decoder_layer_seqs(x, w, std::span<const SeqRows>(&one, 1), h);
}

}  // namespace

int64_t total_rows(std::span<const SeqRows> seqs) {
  int64_t n = 0;
  for (const SeqRows& q : seqs) n += q.n;
  return n;
}

QwenNextModel::QwenNextModel(std::unique_ptr<TensorSource> src, const LoadOptions& opt) : src_(std::move(src)) {
  cfg_ = parse_config(src_->config(), src_->path());
  w_ = bind_weights(*src_, cfg_, opt);
  pool_ = std::make_unique<ThreadPool>(opt.threads);
  inv_freq_ = cpu::rope_inv_freq(cfg_.rot_dim, cfg_.rope_theta);
  info_.family = "qwen_next";
  info_.name = src_->config().value("_name_or_path", std::string("qwen4_exp"));
  if (info_.name.empty()) info_.name = "qwen4_exp";
  info_.vocab_size = cfg_.vocab;
  info_.hidden_size = cfg_.hidden;
  info_.max_context = opt.max_context > 0 ? std::min(opt.max_context, cfg_.max_position) : cfg_.max_position;
  info_.eos_token_ids = cfg_.eos_ids;
  info_.default_prefill_chunk = 2048;
  info_.has_draft_head = w_.mtp != nullptr;
  info_.batched_decode = true;  // decode_batch below
  info_.batched_verify = true;  // verify_batch (spec_commit.cpp)
  info_.batched_prefill = true;  // prefill_batch below
}

std::unique_ptr<ModelState> QwenNextModel::new_state() const {
  return std::make_unique<State>(make_state(cfg_));
}

void QwenNextModel::forward(ModelState& state, std::span<const int32_t> tokens, Logits mode,
                            std::vector<float>& logits) {
  auto& st = dynamic_cast<State&>(state);
  const Config& c = cfg_;
  const int64_t n = int64_t(tokens.size()), W = c.wide(), d = c.hidden;
  logits.clear();
  if (n == 0) return;
  check_window("qwen_next", info_, st.pos, tokens);
  const Ctx x{c, pool_.get(), inv_freq_};
  std::vector<float> h(size_t(n * W));  // {n, hc, d}: the embedding repeated in every stream
  for (int64_t t = 0; t < n; ++t) {
    dequantize_row(w_.embed, tokens[size_t(t)], h.data() + t * W);
    for (int64_t k = 1; k < c.hc; ++k) std::copy_n(h.data() + t * W, d, h.data() + t * W + k * d);
  }
  for (int64_t l = 0; l < c.layers; ++l) {
    decoder_layer(x, w_.layers[size_t(l)], st.layers[size_t(l)], st.pos, tokens.data(), h.data(), n);
    if (on_layer) on_layer(l, h.data(), n);
  }
  record_rows(st, tokens, h.data());
  if (mode == Logits::kNone) return;
  const int64_t first = mode == Logits::kAll ? 0 : n - 1, rows = n - first;
  std::vector<float> mixed(size_t(rows * d));
  hyper_read(x, w_.mixer, h.data() + first * W, rows, mixed.data(), nullptr);
  if (on_layer) on_layer(-1, mixed.data(), rows);
  logits.resize(size_t(rows * c.vocab));
  matmul(w_.lm_head, mixed.data(), rows, logits.data(), pool_.get());
}

void QwenNextModel::prefill_batch(std::span<ModelState* const> states,
                                  std::span<const std::span<const int32_t>> windows, std::vector<float>& logits) {
  if (on_layer) return Model::prefill_batch(states, windows, logits);  // the debug hook sees one sequence per call
  check_batch("qwen_next: prefill_batch", info_, states, windows);
  forward_windows(states, windows, Logits::kLast, logits);
}

void QwenNextModel::decode_batch(std::span<ModelState* const> states, std::span<const int32_t> tokens,
                                 std::vector<float>& logits) {
  if (on_layer) return Model::decode_batch(states, tokens, logits);  // the debug hook sees one sequence per call
  check_decode_batch("qwen_next: decode_batch", info_, states, tokens);
  forward_windows(states, one_token_windows(tokens), Logits::kLast, logits);
}

// forward() over several sequences' windows at once, the rows stacked (window b's after
// those of windows 0..b-1) through decoder_layer_seqs: every matmul reads its weight once
// for all rows; PLE contexts, conv windows, recurrent states and KV caches stay per
// sequence. Row for row the operations of forward() on each window alone, so each row is
// bit for bit that forward's. The callers checked the batch (check_batch: decode_batch,
// captured_verify_batch).
void QwenNextModel::forward_windows(std::span<ModelState* const> states,
                                    std::span<const std::span<const int32_t>> windows, Logits mode,
                                    std::vector<float>& logits) {
  const Config& c = cfg_;
  const int64_t B = int64_t(states.size()), W = c.wide(), d = c.hidden;
  std::vector<State*> st;
  for (int64_t b = 0; b < B; ++b) {
    auto* s = dynamic_cast<State*>(states[size_t(b)]);
    if (!s) throw Error("qwen_next: a batch got a state of another model family");
    st.push_back(s);
  }
  logits.clear();
  if (B == 0) return;
  const Ctx x{c, pool_.get(), inv_freq_};
  const std::vector<int64_t> first = window_starts(windows);
  const int64_t N = first.back();
  std::vector<float> h(size_t(N * W));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < int64_t(windows[size_t(b)].size()); ++t) {
      float* row = h.data() + (first[size_t(b)] + t) * W;
      dequantize_row(w_.embed, windows[size_t(b)][size_t(t)], row);
      for (int64_t k = 1; k < c.hc; ++k) std::copy_n(row, d, row + k * d);
    }
  std::vector<SeqRows> seqs(static_cast<size_t>(B));
  for (int64_t l = 0; l < c.layers; ++l) {
    for (int64_t b = 0; b < B; ++b)
      seqs[size_t(b)] = {&st[size_t(b)]->layers[size_t(l)], st[size_t(b)]->pos, int64_t(windows[size_t(b)].size()),
                         windows[size_t(b)].data()};
    decoder_layer_seqs(x, w_.layers[size_t(l)], seqs, h.data());
  }
  for (int64_t b = 0; b < B; ++b) record_rows(*st[size_t(b)], windows[size_t(b)], h.data() + first[size_t(b)] * W);
  const std::vector<int64_t> rows = logit_rows(first, mode);
  if (rows.empty()) return;
  std::vector<float> hr(rows.size() * size_t(W)), mixed(rows.size() * size_t(d));
  gather_rows(h.data(), rows, W, hr.data());
  hyper_read(x, w_.mixer, hr.data(), int64_t(rows.size()), mixed.data(), nullptr);
  logits.resize(rows.size() * size_t(c.vocab));
  matmul(w_.lm_head, mixed.data(), int64_t(rows.size()), logits.data(), pool_.get());
}

// After a forward of `tokens` whose last-layer rows are h {n, hc*d}: the MTP head's queued
// pairs (row i pairs with token i+1: the head predicts two ahead), the last row, the position.
void QwenNextModel::record_rows(State& st, std::span<const int32_t> tokens, const float* h) {
  const int64_t n = int64_t(tokens.size()), W = cfg_.wide();
  if (st.mtp_on) {
    if (!st.last_wide.empty()) {
      st.pending_wide.insert(st.pending_wide.end(), st.last_wide.begin(), st.last_wide.end());
      st.pending_next.push_back(tokens[0]);
    }
    st.pending_wide.insert(st.pending_wide.end(), h, h + (n - 1) * W);
    st.pending_next.insert(st.pending_next.end(), tokens.begin() + 1, tokens.end());
  }
  st.last_wide.assign(h + (n - 1) * W, h + n * W);
  st.pos += n;
}

PleTableStats QwenNextModel::ple_stats() const {
  PleTableStats s;
  for (const auto& l : w_.layers)
    if (l.ple) {
      const PleTableStats t = l.ple->table->stats();
      s.hits += t.hits;
      s.misses += t.misses;
      s.evictions += t.evictions;
      s.bytes_read += t.bytes_read;
    }
  return s;
}

void QwenNextModel::enable_mtp(ModelState& state) const {
  auto& st = dynamic_cast<State&>(state);
  if (!w_.mtp) throw InputError("qwen_next: this checkpoint has no MTP head (mtp.* tensors)");
  if (st.pos != 0) throw InputError("qwen_next: enable_mtp must precede the first forward");
  st.mtp_on = true;
}

namespace {

// MTPLX Qwen4ExpMTP._prepare_inputs_eager: fc_hidden(norm_h(wide)) per stream +
// fc_emb(norm_e(embed(token))) in every stream. wide {n, hc*d} -> out {n, hc*d}.
void mtp_prepare(const Ctx& x, const MtpWeights& m, const WeightMatrix& embed, const float* wide,
                 const int32_t* next, int64_t n, float* out) {
  const Config& c = x.c;
  const int64_t W = c.wide(), d = c.hidden;
  std::vector<float> hn(size_t(n * W)), e(size_t(n * d)), fe(size_t(n * d));
  for (int64_t t = 0; t < n; ++t) {
    cpu::rmsnorm_f32(wide + t * W, m.norm_hidden.data(), 1.0f, W, c.rms_eps, hn.data() + t * W);  // full width
    dequantize_row(embed, next[t], e.data() + t * d);
    cpu::rmsnorm_f32(e.data() + t * d, m.norm_emb.data(), 1.0f, d, c.rms_eps, e.data() + t * d);
  }
  matmul(m.fc_hidden, hn.data(), n * c.hc, out, x.pool);  // {n*hc, d}: shared across streams
  matmul(m.fc_emb, e.data(), n, fe.data(), x.pool);
  for (int64_t t = 0; t < n; ++t)
    for (int64_t k = 0; k < c.hc; ++k)
      for (int64_t i = 0; i < d; ++i) out[t * W + k * d + i] += fe[size_t(t * d + i)];
}

}  // namespace

void QwenNextModel::mtp_catch_up(State& st) {
  const int64_t n = int64_t(st.pending_next.size());
  if (n == 0) return;
  const Ctx x{cfg_, pool_.get(), inv_freq_};
  std::vector<float> rows(size_t(n * cfg_.wide()));
  mtp_prepare(x, *w_.mtp, w_.embed, st.pending_wide.data(), st.pending_next.data(), n, rows.data());
  decoder_layer(x, w_.mtp->layer, st.mtp, st.mtp_pos, nullptr, rows.data(), n);
  st.mtp_pos += n;
  st.pending_wide.clear();
  st.pending_next.clear();
}

void QwenNextModel::mtp_draft(ModelState& state, int32_t next_token, int depth, std::vector<float>& logits,
                              std::vector<int32_t>& drafts, const DraftHead::Pick& pick) {
  auto& st = dynamic_cast<State&>(state);
  if (!st.mtp_on || st.last_wide.empty()) throw InputError("qwen_next: mtp_draft needs enable_mtp() and a prefill");
  if (next_token < 0 || next_token >= cfg_.vocab) throw InputError("qwen_next: draft token id out of range");
  mtp_catch_up(st);
  const Ctx x{cfg_, pool_.get(), inv_freq_};
  const int64_t W = cfg_.wide(), d = cfg_.hidden, V = cfg_.vocab;
  // Drafts never enter the committed head history: the head's layer is QSA-only, so its
  // state is four append-only caches; remember their sizes and trim back afterwards
  // (O(depth) instead of copying the whole history).
  LayerState& hs = st.mtp;
  const int64_t nk = hs.k.rows(), nv = hs.v.rows(), nr = hs.idx_raw.rows(), np = hs.idx_pooled.rows();
  std::vector<float> row(static_cast<size_t>(W)), mixed(static_cast<size_t>(d));
  mtp_prepare(x, *w_.mtp, w_.embed, st.last_wide.data(), &next_token, 1, row.data());
  logits.assign(size_t(depth * V), 0.0f);
  drafts.clear();
  for (int k = 0; k < depth; ++k) {
    decoder_layer(x, w_.mtp->layer, hs, st.mtp_pos + k, nullptr, row.data(), 1);  // row: pre-mixer out
    hyper_read(x, w_.mtp->mixer, row.data(), 1, mixed.data(), nullptr);
    float* lg = logits.data() + k * V;
    matvec(w_.lm_head, mixed.data(), lg, pool_.get());
    const int32_t tok = pick ? pick(std::span<const float>(lg, size_t(V))) : int32_t(std::max_element(lg, lg + V) - lg);
    if (tok < 0 || tok >= V) throw Error("qwen_next: draft pick returned token " + std::to_string(tok));
    drafts.push_back(tok);
    std::vector<float> next(static_cast<size_t>(W));
    mtp_prepare(x, *w_.mtp, w_.embed, row.data(), &tok, 1, next.data());
    row.swap(next);
  }
  hs.k.truncate(nk);
  hs.v.truncate(nv);
  hs.idx_raw.truncate(nr);
  hs.idx_pooled.truncate(np);
}

}  // namespace ds4::qwen_next
