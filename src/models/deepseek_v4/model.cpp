// DeepSeek V4 forward: embedding -> HC streams -> per layer (HC pre, attention, HC post,
// HC pre, MoE, HC post) -> HC head -> norm -> lm_head. One batched pass per chunk.
#include "models/deepseek_v4/model.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "backend/cpu/hyper_connections.h"
#include "backend/cpu/norm.h"
#include "backend/cpu/rope.h"
#include "backend/cpu/rope_yarn.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "formats/tensor_source.h"
#include "models/deepseek_v4/gguf.h"
#include "models/deepseek_v4/dspark.h"
#include "models/deepseek_v4/layers.h"
#include "models/deepseek_v4/mtp.h"
#include "models/deepseek_v4/spec_commit.h"
#include "models/deepseek_v4/state_cost.h"
#include "models/batch_rows.h"
#include "models/draft_head.h"

namespace ds4::deepseek_v4 {

// HF config.json, or the deepseek4.* keys of a ds4-layout GGUF.
Config config_of(const TensorSource& src) {
  const nlohmann::json& j = text_config(src.config());
  if (j.value("architecture", std::string()) != "deepseek4") return parse_config(j, src.path());
  nlohmann::json hf = hf_config_from_ds4(j, src.path());
  const auto& md = src.metadata();
  if (md.contains("tokenizer.ggml.eos_token_id")) hf["eos_token_id"] = md["tokenizer.ggml.eos_token_id"];
  return parse_config(hf, src.path());
}

bool ds4_numerics_for(bool ds4_layout) {
  // ds4 numerics: what ds4 computes for its own files; HF's graph for HF checkpoints.
  // DS4_DSV4_NUMERICS=hf|ds4 overrides (e.g. to compare a GGUF against the HF oracle).
  if (const char* e = std::getenv("DS4_DSV4_NUMERICS")) {
    const std::string v = e;
    if (v != "hf" && v != "ds4") throw InputError("DS4_DSV4_NUMERICS must be 'hf' or 'ds4', got '" + v + "'");
    return v == "ds4";
  }
  return ds4_layout;
}

bool act_quant_for(bool ds4_numerics) {
  // ds4 quantizes the activations of every Q8_0 / Q2_K / IQ2_XXS product in decode: part of
  // what ds4 computes for its own files (reference-differences #8), so it follows ds4_numerics.
  const char* e = std::getenv("DS4_ACT_QUANT");
  if (!e) return ds4_numerics;
  const std::string v = e;
  if (v != "q8" && v != "f32") throw InputError("DS4_ACT_QUANT must be 'q8' or 'f32', got '" + v + "'");
  return v == "q8";
}

namespace {

std::vector<float> inv_freq(const RopeConfig& r, int64_t rot_dim) {
  return r.yarn ? cpu::rope_yarn_inv_freq(rot_dim, r.theta, r.yarn_params) : cpu::rope_inv_freq(rot_dim, r.theta);
}

class DsModel : public Model, public DraftHead {
 public:
  DsModel(std::unique_ptr<TensorSource> src, const LoadOptions& opt)
      : src_(std::move(src)),
        c_(config_of(*src_)),
        w_(bind_weights(*src_, c_)),
        inv_main_(inv_freq(c_.rope_main, c_.rope_dim)),
        inv_comp_(inv_freq(c_.rope_compress, c_.rope_dim)),
        pool_(opt.threads) {
    c_.ds4_numerics = ds4_numerics_for(w_.ds4_layout);
    c_.act_quant = act_quant_for(c_.ds4_numerics);
    info_.family = "deepseek_v4";
    info_.name = src_->config().value("_name_or_path", std::filesystem::path(src_->path()).filename().string());
    info_.vocab_size = c_.vocab;
    info_.hidden_size = c_.hidden;
    info_.max_context = opt.max_context > 0 ? std::min(opt.max_context, c_.max_positions) : c_.max_positions;
    info_.eos_token_ids = c_.eos;
    info_.default_prefill_chunk = 4096;  // SPEC §4
    info_.batched_decode = true;  // decode_batch below
    info_.batched_verify = true;  // verify_batch below
    info_.batched_prefill = true;  // prefill_batch below
    hc_.n_hc = c_.hc;
    hc_.hidden = c_.hidden;
    hc_.sinkhorn_iters = c_.sinkhorn_iters;
    hc_.hc_eps = c_.hc_eps;
    hc_.norm_eps = c_.rms_eps;
    if (w_.mtp) c_ = with_mtp_layer(c_);  // the head's layer is index c_.layers
    if (w_.dspark) c_ = with_dspark_layers(c_);  // stages c_.layers .. c_.layers + 2
  }

  const ModelInfo& info() const override { return info_; }
  StateCost state_cost(bool draft) override {
    return deepseek_v4::state_cost(c_, w_, Model::state_cost(draft), draft);
  }

  std::unique_ptr<ModelState> new_state() const override {
    return std::make_unique<State>(make_state(c_));
  }

  void forward(ModelState& base, std::span<const int32_t> tokens, Logits mode, std::vector<float>& logits) override;
  void decode_batch(std::span<ModelState* const> states, std::span<const int32_t> tokens,
                    std::vector<float>& logits) override;
  bool verify_batch(std::span<ModelState* const> states, std::span<const std::span<const int32_t>> windows,
                    std::vector<float>& logits) override;
  void prefill_batch(std::span<ModelState* const> states, std::span<const std::span<const int32_t>> windows,
                     std::vector<float>& logits) override;
  LayerObserver observer;
  std::unique_ptr<OperandRounding> rounding;  // set_tensor_core_emulation
  int64_t rounding_rows = 0;
  const Weights& weights() const { return w_; }

  // DraftHead over ds4's MTP block or MTPLX's DSpark (DSpark wins when both are present;
  // nullptr when the checkpoint has neither).
  DraftHead* draft_head() override { return w_.mtp || w_.dspark ? this : nullptr; }
  void enable_draft(ModelState& state) const override {
    State& s = as_state(state);
    if (!w_.mtp && !w_.dspark) throw InputError("deepseek_v4: this checkpoint has no MTP head (mtp.0.* tensors)");
    if (s.pos != 0) throw InputError("deepseek_v4: enable the draft head before the first forward");
    s.mtp_on = w_.mtp != nullptr;
    s.dspark_on = w_.dspark != nullptr;
    if (w_.dspark) s.dspark_ring.assign(w_.dspark->stages.size(), {});
  }
  void draft(ModelState& state, int32_t next_token, int depth, std::vector<int32_t>& drafts) override {
    draft_gated(state, next_token, depth, 0.0, drafts);
  }
  // DSpark: one K5 pass, the first min(depth, 5) futures, cut before the first row whose
  // confidence is under the turn's gate (SPEC §2). ds4's MTP head has no confidence: no cut.
  void draft_gated(ModelState& state, int32_t next_token, int depth, double min_confidence,
                   std::vector<int32_t>& drafts) override {
    const Ctx ctx{c_, &pool_, inv_main_, inv_comp_};
    if (w_.dspark) {
      if (depth < 0) throw InputError("deepseek_v4: negative draft depth " + std::to_string(depth));
      dspark_draft(ctx, hc_, w_, as_state(state), next_token, dspark_);
      draft_logits_ = dspark_.logits;
      size_t keep = std::min<size_t>(size_t(depth), dspark_.drafts.size()), k = 0;
      while (k < keep && dspark_.confidence[k] >= min_confidence) ++k;
      drafts.assign(dspark_.drafts.begin(), dspark_.drafts.begin() + k);
      return;
    }
    mtp_draft(ctx, hc_, w_, as_state(state), next_token, depth, draft_logits_, drafts);
  }
  // ds4's MTP chain can draw each draft from the sampler's q (exact); DSpark drafts its block
  // in one pass, so it stays a greedy (point-mass) proposal.
  bool draft_picked(ModelState& state, int32_t next_token, int depth, const Pick& pick,
                    std::vector<int32_t>& drafts) override {
    if (w_.dspark) return false;
    const Ctx ctx{c_, &pool_, inv_main_, inv_comp_};
    mtp_draft(ctx, hc_, w_, as_state(state), next_token, depth, draft_logits_, drafts, &pick);
    return true;
  }
  const std::vector<float>& last_draft_logits() const { return draft_logits_; }
  const DsparkDraft& last_dspark() const { return dspark_; }
  // Captured-prefix commit (spec_commit.cpp): any kept prefix of the verify window without
  // re-running it.
  bool verify_capture(ModelState& trial, std::span<const int32_t> tokens, std::vector<float>& logits) override {
    State& s = as_state(trial);
    return captured_verify(*this, trial, tokens, logits, [&] { capture_begin(s); }, [&] { capture_end(s, tokens); },
                           [&] { capture_abort(s); });
  }
  void commit_prefix(ModelState& trial, int64_t keep) override { commit_captured_prefix(c_, w_, as_state(trial), keep); }

 private:
  static State& as_state(ModelState& base) {
    auto* s = dynamic_cast<State*>(&base);
    if (!s) throw Error("deepseek_v4: state belongs to another model family");
    return *s;
  }
  // decode_batch / verify_batch: forward() over several states' windows in one pass.
  void forward_windows(std::span<ModelState* const> states, std::span<const std::span<const int32_t>> windows,
                       Logits mode, std::vector<float>& logits);
  std::vector<float> draft_logits_;  // {depth + 1, vocab} of the last draft() (DSpark: {5, vocab})
  DsparkDraft dspark_;

  std::unique_ptr<TensorSource> src_;
  Config c_;
  Weights w_;
  std::vector<float> inv_main_, inv_comp_;
  ThreadPool pool_;
  cpu::HcShape hc_;
  ModelInfo info_;
};

}  // namespace

// x {T, hc, hidden} in/out.
void decoder_layer(const Ctx& ctx, const cpu::HcShape& hc, const LayerWeights& w, int64_t l, LayerState& s,
                   const int32_t* tokens, int64_t T, int64_t p0, std::vector<float>& x) {
  const SeqRows one{&s, p0, T};
  decoder_layer_seqs(ctx, hc, w, l, std::span<const SeqRows>(&one, 1), tokens, x);
}

void decoder_layer_seqs(const Ctx& ctx, const cpu::HcShape& hc, const LayerWeights& w, int64_t l,
                        std::span<const SeqRows> seqs, const int32_t* tokens, std::vector<float>& x) {
  const Config& c = ctx.c;
  const int64_t H = c.hidden, n = c.hc;
  int64_t T = 0;
  for (const SeqRows& q : seqs) T += q.T;
  std::vector<float> col(static_cast<size_t>(T * H)), post(static_cast<size_t>(T * n)), comb(static_cast<size_t>(T * n * n)), y(static_cast<size_t>(T * H));
  std::vector<float> next(x.size());
  cpu::hc_pre_f32(w.attn_hc.view(), hc, x.data(), T, col.data(), post.data(), comb.data(), ctx.pool);
  for (int64_t t = 0; t < T; ++t)
    cpu::rmsnorm_f32(col.data() + t * H, w.attn_norm.data(), 0.0f, H, c.rms_eps, col.data() + t * H);
  attention_forward_seqs(ctx, w, l, seqs, col.data(), y.data());
  cpu::hc_post_f32(hc, y.data(), x.data(), post.data(), comb.data(), T, next.data());
  cpu::hc_pre_f32(w.ffn_hc.view(), hc, next.data(), T, col.data(), post.data(), comb.data(), ctx.pool);
  for (int64_t t = 0; t < T; ++t)
    cpu::rmsnorm_f32(col.data() + t * H, w.ffn_norm.data(), 0.0f, H, c.rms_eps, col.data() + t * H);
  moe_forward(ctx, w, l, tokens, col.data(), T, y.data());
  cpu::hc_post_f32(hc, y.data(), next.data(), post.data(), comb.data(), T, x.data());
}

namespace {

// DSpark tap k (DSparkTargetRoute): the HC mean of a tap layer's output, x {rows, n, H} ->
// taps[row][k] of {rows, K, H}.
void tap_mean(const float* x, int64_t rows, int64_t n, int64_t H, int64_t k, int64_t K, float* taps) {
  for (int64_t t = 0; t < rows; ++t)
    for (int64_t i = 0; i < H; ++i) {
      float sum = 0.0f;
      for (int64_t j = 0; j < n; ++j) sum += x[(t * n + j) * H + i];
      taps[(t * K + k) * H + i] = sum / float(n);
    }
}

void DsModel::forward(ModelState& base, std::span<const int32_t> tokens, Logits mode, std::vector<float>& logits) {
  auto* s = dynamic_cast<State*>(&base);
  if (!s) throw Error("deepseek_v4: state belongs to another model family");
  const int64_t T = int64_t(tokens.size()), H = c_.hidden, n = c_.hc;
  logits.clear();
  if (T == 0) return;
  check_window("deepseek_v4", info_, s->pos, tokens);
  // every HC stream starts as the token embedding: x {T, hc, hidden}
  std::vector<float> x(static_cast<size_t>(T * n * H));
  for (int64_t t = 0; t < T; ++t) {
    dequantize_row(w_.embed, tokens[size_t(t)], x.data() + t * n * H);
    for (int64_t j = 1; j < n; ++j) std::copy_n(x.data() + t * n * H, H, x.data() + (t * n + j) * H);
  }
  // tensor-core emulation (diagnostics): a forward of at least its rows, as a CUDA chunk would
  const bool emulate = rounding && rounding_rows > 0 && T >= rounding_rows;
  const Ctx ctx{c_, &pool_, inv_main_, inv_comp_, emulate ? rounding.get() : nullptr};
  // DSpark taps (DSparkTargetRoute): HC mean of each tap layer's output {T, n_taps * H}
  const bool taps_on = s->dspark_on && w_.dspark;
  const int64_t K = int64_t(c_.dspark_taps.size());
  std::vector<float> taps(taps_on ? size_t(T * K * H) : 0);
  for (int64_t l = 0; l < c_.layers; ++l) {
    decoder_layer(ctx, hc_, w_.layers[size_t(l)], l, s->layers[size_t(l)], tokens.data(), T, s->pos, x);
    if (observer) observer(l, x.data(), T);
    for (int64_t k = 0; taps_on && k < K; ++k)
      if (c_.dspark_taps[size_t(k)] == l) tap_mean(x.data(), T, n, H, k, K, taps.data());
  }
  mtp_record(ctx, hc_, w_, *s, tokens, s->pos, x.data());  // no-op unless the head is on
  if (taps_on) dspark_record(ctx, w_, *s, taps.data(), T, s->pos);
  s->pos += T;
  if (mode == Logits::kNone) return;
  const int64_t first = mode == Logits::kLast ? T - 1 : 0, rows = T - first;
  std::vector<float> h(static_cast<size_t>(rows * H));
  cpu::hc_head_f32(w_.head_hc.view(), hc_, x.data() + first * n * H, rows, h.data(), &pool_);
  for (int64_t r = 0; r < rows; ++r) cpu::rmsnorm_f32(h.data() + r * H, w_.norm.data(), 0.0f, H, c_.rms_eps, h.data() + r * H);
  logits.resize(size_t(rows * c_.vocab));
  product(ctx, w_.lm_head, h.data(), rows, logits.data());
}

void DsModel::prefill_batch(std::span<ModelState* const> states, std::span<const std::span<const int32_t>> windows,
                            std::vector<float>& logits) {
  // The observer sees one sequence per call; the tensor-core emulation rounds by a forward's rows.
  if (observer || rounding) return Model::prefill_batch(states, windows, logits);
  check_batch("deepseek_v4: prefill_batch", info_, states, windows);
  forward_windows(states, windows, Logits::kLast, logits);
}

void DsModel::decode_batch(std::span<ModelState* const> states, std::span<const int32_t> tokens,
                           std::vector<float>& logits) {
  if (observer) return Model::decode_batch(states, tokens, logits);  // the observer sees one sequence per call
  check_decode_batch("deepseek_v4: decode_batch", info_, states, tokens);
  forward_windows(states, one_token_windows(tokens), Logits::kLast, logits);
}

bool DsModel::verify_batch(std::span<ModelState* const> states, std::span<const std::span<const int32_t>> windows,
                           std::vector<float>& logits) {
  // The observer sees one sequence per call; the tensor-core emulation rounds per forward.
  if (observer || rounding) return Model::verify_batch(states, windows, logits);
  return captured_verify_batch(
      *this, states, windows, logits, "deepseek_v4: verify_batch", [&](ModelState& s) { capture_begin(as_state(s)); },
      [&] { forward_windows(states, windows, Logits::kAll, logits); },
      [&](ModelState& s, std::span<const int32_t> w) { capture_end(as_state(s), w); },
      [&](ModelState& s) { capture_abort(as_state(s)); });
}

// forward() over several sequences' windows at once, the rows stacked (window b's after
// those of windows 0..b-1): embedding, HC mixes, MoE, attention projections, HC head and
// lm_head once over all rows (decoder_layer_seqs); attention keys, compressor lanes, the
// draft heads' records and DSpark taps per sequence. Row for row the operations of forward()
// on each window alone (no tensor-core emulation), so each row is bit for bit that forward's.
// The callers checked the batch (check_batch: decode_batch, captured_verify_batch).
void DsModel::forward_windows(std::span<ModelState* const> states, std::span<const std::span<const int32_t>> windows,
                              Logits mode, std::vector<float>& logits) {
  const int64_t B = int64_t(states.size()), H = c_.hidden, n = c_.hc;
  std::vector<State*> st;
  std::vector<int32_t> tokens;  // every row's token, stacked (the hash-routed MoE layers read them)
  for (int64_t b = 0; b < B; ++b) {
    st.push_back(&as_state(*states[size_t(b)]));
    tokens.insert(tokens.end(), windows[size_t(b)].begin(), windows[size_t(b)].end());
  }
  logits.clear();
  if (B == 0) return;
  const std::vector<int64_t> first = window_starts(windows);
  const int64_t N = first.back();
  std::vector<float> x(static_cast<size_t>(N * n * H));
  for (int64_t r = 0; r < N; ++r) {
    dequantize_row(w_.embed, tokens[size_t(r)], x.data() + r * n * H);
    for (int64_t j = 1; j < n; ++j) std::copy_n(x.data() + r * n * H, H, x.data() + (r * n + j) * H);
  }
  const Ctx ctx{c_, &pool_, inv_main_, inv_comp_};
  const int64_t K = int64_t(c_.dspark_taps.size());
  std::vector<float> taps(w_.dspark ? size_t(N * K * H) : 0);  // as forward(), for the sequences with DSpark on
  std::vector<SeqRows> seqs(static_cast<size_t>(B));
  for (int64_t l = 0; l < c_.layers; ++l) {
    for (int64_t b = 0; b < B; ++b)
      seqs[size_t(b)] = {&st[size_t(b)]->layers[size_t(l)], st[size_t(b)]->pos, int64_t(windows[size_t(b)].size())};
    decoder_layer_seqs(ctx, hc_, w_.layers[size_t(l)], l, seqs, tokens.data(), x);
    for (int64_t k = 0; w_.dspark && k < K; ++k)
      if (c_.dspark_taps[size_t(k)] == l) tap_mean(x.data(), N, n, H, k, K, taps.data());
  }
  for (int64_t b = 0; b < B; ++b) {
    State& s = *st[size_t(b)];
    const int64_t r0 = first[size_t(b)], T = int64_t(windows[size_t(b)].size());
    mtp_record(ctx, hc_, w_, s, windows[size_t(b)], s.pos, x.data() + r0 * n * H);
    if (s.dspark_on && w_.dspark) dspark_record(ctx, w_, s, taps.data() + r0 * K * H, T, s.pos);
    s.pos += T;
  }
  const std::vector<int64_t> rows = logit_rows(first, mode);
  if (rows.empty()) return;
  const int64_t R = int64_t(rows.size());
  std::vector<float> xr(static_cast<size_t>(R * n * H)), h(static_cast<size_t>(R * H));
  gather_rows(x.data(), rows, n * H, xr.data());
  cpu::hc_head_f32(w_.head_hc.view(), hc_, xr.data(), R, h.data(), &pool_);
  for (int64_t r = 0; r < R; ++r) cpu::rmsnorm_f32(h.data() + r * H, w_.norm.data(), 0.0f, H, c_.rms_eps, h.data() + r * H);
  logits.resize(size_t(R * c_.vocab));
  product(ctx, w_.lm_head, h.data(), R, logits.data());
}

}  // namespace

void set_layer_observer(Model& m, LayerObserver fn) {
  auto* d = dynamic_cast<DsModel*>(&m);
  if (!d) throw Error("set_layer_observer: not a deepseek_v4 model");
  d->observer = std::move(fn);
}

void set_tensor_core_emulation(Model& m, int64_t min_rows, bool truncate) {
  auto* d = dynamic_cast<DsModel*>(&m);
  if (!d) throw Error("set_tensor_core_emulation: not a deepseek_v4 model");
  if (min_rows < 0) throw InputError("set_tensor_core_emulation: min_rows " + std::to_string(min_rows) + " < 0");
  d->rounding = min_rows > 0 ? std::make_unique<OperandRounding>(d->weights(), truncate) : nullptr;
  d->rounding_rows = min_rows;
}

void mtp_draft_logits(Model& m, ModelState& state, int32_t next_token, int depth, std::vector<float>& logits,
                      std::vector<int32_t>& drafts) {
  auto* d = dynamic_cast<DsModel*>(&m);
  if (!d) throw Error("deepseek_v4::mtp_draft_logits: not a deepseek_v4 model");
  if (!d->draft_head()) throw InputError("deepseek_v4: this checkpoint has no MTP head (mtp.0.* tensors)");
  d->draft(state, next_token, depth, drafts);
  logits = d->last_draft_logits();
}

void dspark_draft_details(Model& m, ModelState& state, int32_t primary, std::vector<float>& logits,
                          std::vector<int32_t>& drafts, std::vector<float>& confidence) {
  auto* d = dynamic_cast<DsModel*>(&m);
  if (!d) throw Error("deepseek_v4::dspark_draft_details: not a deepseek_v4 model");
  if (!d->draft_head()) throw InputError("deepseek_v4: this checkpoint has no draft head");
  d->draft(state, primary, 5, drafts);
  logits = d->last_dspark().logits;
  confidence = d->last_dspark().confidence;
}

bool probe(const std::string& path) {
  namespace fs = std::filesystem;
  if (fs::is_directory(path)) {
    std::ifstream f(fs::path(path) / "config.json");
    if (!f) return false;
    const auto j = nlohmann::json::parse(f, nullptr, false);
    return !j.is_discarded() && j.value("model_type", std::string()) == "deepseek_v4";
  }
  if (path.size() > 5 && path.substr(path.size() - 5) == ".gguf") {
    const auto src = open_tensor_source(path);
    const auto& md = src->metadata();
    return md.contains("general.architecture") && md["general.architecture"] == "deepseek4";
  }
  return false;
}

std::unique_ptr<Model> load(const std::string& path, const LoadOptions& options) {
  return std::make_unique<DsModel>(open_tensor_source(path), options);
}

}  // namespace ds4::deepseek_v4
