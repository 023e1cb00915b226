#include "models/glm5/model.h"

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "core/thread_pool.h"
#include "formats/tensor_source.h"
#include "models/batch_rows.h"
#include "models/draft_head.h"
#include "models/glm5/config.h"
#include "models/glm5/indexer.h"
#include "models/glm5/kda.h"
#include "models/glm5/layer.h"
#include "models/glm5/mtp.h"
#include "models/glm5/state_cost.h"
#include "models/glm5/spec_commit.h"
#include "models/glm5/state.h"
#include "models/glm5/weights.h"

namespace ds4::glm5 {
namespace {

bool is_glm5_type(const std::string& t) { return t == "glm5_next" || t == "glm5_next_text"; }

// Where the config came from, for error messages.
std::string config_where(const TensorSource& src) {
  if (std::filesystem::is_directory(src.path())) return (std::filesystem::path(src.path()) / "config.json").string();
  return src.path() + ": ds4.config_json";
}

class Glm5Model final : public Model, public DraftHead {
 public:
  Glm5Model(std::unique_ptr<TensorSource> src, const LoadOptions& opt)
      : src_(std::move(src)), cfg_(parse_config(src_->config(), config_where(*src_))),
        w_(bind_weights(*src_, cfg_)), pool_(opt.threads) {
    info_.family = "glm5";
    info_.name = src_->config().value("_name_or_path", std::filesystem::path(src_->path()).filename().string());
    info_.vocab_size = cfg_.vocab_size;
    info_.hidden_size = cfg_.hidden_size;
    info_.max_context = opt.max_context > 0 ? std::min(opt.max_context, cfg_.max_position_embeddings)
                                            : cfg_.max_position_embeddings;
    info_.eos_token_ids = cfg_.eos_token_ids;
    info_.default_prefill_chunk = 2048;
    info_.batched_decode = true;  // decode_batch below
    info_.batched_verify = true;  // verify_batch below
    info_.batched_prefill = true;  // prefill_batch below
  }

  const ModelInfo& info() const override { return info_; }
  StateCost state_cost(bool draft) override {
    return glm5::state_cost(cfg_, w_, Model::state_cost(draft), draft);
  }

  std::unique_ptr<ModelState> new_state() const override {
    return std::make_unique<State>(make_state(cfg_));
  }

  void forward(ModelState& state, std::span<const int32_t> tokens, Logits mode, std::vector<float>& logits) override;
  void decode_batch(std::span<ModelState* const> states, std::span<const int32_t> tokens,
                    std::vector<float>& logits) override;
  bool verify_batch(std::span<ModelState* const> states, std::span<const std::span<const int32_t>> windows,
                    std::vector<float>& logits) override;
  void prefill_batch(std::span<ModelState* const> states, std::span<const std::span<const int32_t>> windows,
                     std::vector<float>& logits) override;
  // Set by layer_outputs(): receives the streams after each layer.
  std::vector<std::vector<float>>* tap = nullptr;

  // DraftHead over the integrated MTP layer (nullptr when the checkpoint has none).
  DraftHead* draft_head() override { return w_.mtp ? this : nullptr; }
  void enable_draft(ModelState& state) const override { mtp_enable(cfg_, w_, as_state(state)); }
  void draft(ModelState& state, int32_t next_token, int depth, std::vector<int32_t>& drafts) override {
    mtp_draft(cfg_, w_, as_state(state), next_token, depth, draft_logits_, drafts, &pool_);
  }
  bool draft_picked(ModelState& state, int32_t next_token, int depth, const Pick& pick,
                    std::vector<int32_t>& drafts) override {
    mtp_draft(cfg_, w_, as_state(state), next_token, depth, draft_logits_, drafts, &pool_, &pick);
    return true;
  }
  const std::vector<float>& last_draft_logits() const { return draft_logits_; }
  // Captured-prefix commit (spec_commit.cpp): any kept prefix of the verify window without
  // re-running it.
  bool verify_capture(ModelState& trial, std::span<const int32_t> tokens, std::vector<float>& logits) override {
    State& st = as_state(trial);
    return captured_verify(*this, trial, tokens, logits, [&] { capture_begin(st); }, [&] { capture_end(st, tokens); },
                           [&] { capture_abort(st); });
  }
  void commit_prefix(ModelState& trial, int64_t keep) override { commit_captured_prefix(cfg_, as_state(trial), keep); }

 private:
  static State& as_state(ModelState& s) {
    auto* st = dynamic_cast<State*>(&s);
    if (!st) throw Error("glm5: got a state of another model family");
    return *st;
  }
  // decode_batch / verify_batch: forward() over several states' windows in one pass.
  void forward_windows(std::span<ModelState* const> states, std::span<const std::span<const int32_t>> windows,
                       Logits mode, std::vector<float>& logits);
  std::vector<float> draft_logits_;  // {depth, vocab} of the last draft() call

  std::unique_ptr<TensorSource> src_;
  Config cfg_;
  Weights w_;
  ThreadPool pool_;
  ModelInfo info_;
};

void Glm5Model::forward(ModelState& state, std::span<const int32_t> tokens, Logits mode, std::vector<float>& logits) {
  auto* st = dynamic_cast<State*>(&state);
  if (!st) throw Error("glm5: forward() got a state of another model family");
  const int64_t n = int64_t(tokens.size()), H = cfg_.hidden_size, hc = cfg_.hc_mult;
  if (n == 0) {
    logits.clear();
    return;
  }
  check_window("glm5", info_, st->pos, tokens);
  // Streams {n, hc, hidden}: every stream starts as the token embedding.
  std::vector<float> x(size_t(n * hc * H)), tmp(size_t(n * hc * H));
  for (int64_t t = 0; t < n; ++t) {
    dequantize_row(w_.embed, tokens[size_t(t)], x.data() + t * hc * H);
    for (int64_t s = 1; s < hc; ++s) std::copy_n(x.data() + t * hc * H, H, x.data() + (t * hc + s) * H);
  }
  Selection sel;  // written by full-indexer layers, read by the shared layer after them
  for (int64_t l = 0; l < cfg_.num_hidden_layers; ++l) {
    const auto li = size_t(l);
    decoder_layer(w_.layers[li], cfg_, &st->kda[li], &st->mla[li], st->pos, n, x, tmp, sel, &pool_);
    if (tap) tap->push_back(x);
  }
  st->pos += n;
  if (mode == Logits::kNone && !st->mtp_on) {
    logits.clear();
    return;
  }
  // Final head: unweighted mean of the streams, RMSNorm, lm_head. The MTP head needs the
  // normed output of every row.
  const int64_t first = st->mtp_on || mode == Logits::kAll ? 0 : n - 1;
  std::vector<float> h(size_t((n - first) * H));
  hc_mean(cfg_, x.data() + first * hc * H, n - first, w_.norm.data(), h.data());
  mtp_record(cfg_, *st, tokens, h.data());  // no-op unless the head is on (then first == 0)
  if (mode == Logits::kNone) {
    logits.clear();
    return;
  }
  const int64_t from = mode == Logits::kLast ? n - 1 - first : 0, rows = n - first - from;
  logits.resize(size_t(rows * cfg_.vocab_size));
  matmul(w_.lm_head, h.data() + from * H, rows, logits.data(), &pool_);
}

void Glm5Model::decode_batch(std::span<ModelState* const> states, std::span<const int32_t> tokens,
                             std::vector<float>& logits) {
  check_decode_batch("glm5: decode_batch", info_, states, tokens);
  forward_windows(states, one_token_windows(tokens), Logits::kLast, logits);
}

void Glm5Model::prefill_batch(std::span<ModelState* const> states, std::span<const std::span<const int32_t>> windows,
                              std::vector<float>& logits) {
  if (tap) return Model::prefill_batch(states, windows, logits);  // layer_outputs() taps one sequence per call
  check_batch("glm5: prefill_batch", info_, states, windows);
  forward_windows(states, windows, Logits::kLast, logits);
}

bool Glm5Model::verify_batch(std::span<ModelState* const> states, std::span<const std::span<const int32_t>> windows,
                             std::vector<float>& logits) {
  return captured_verify_batch(
      *this, states, windows, logits, "glm5: verify_batch", [&](ModelState& s) { capture_begin(as_state(s)); },
      [&] { forward_windows(states, windows, Logits::kAll, logits); },
      [&](ModelState& s, std::span<const int32_t> w) { capture_end(as_state(s), w); },
      [&](ModelState& s) { capture_abort(as_state(s)); });
}

// forward() over several sequences' windows at once, the rows stacked (window b's after
// those of windows 0..b-1): every matmul reads its weight once for all rows; the attention
// mixers keep per-sequence state (decoder_layer_seqs). Row for row the operations of
// forward() on each window alone, so each row is bit for bit that forward's. The callers
// checked the batch (check_batch: decode_batch, captured_verify_batch).
void Glm5Model::forward_windows(std::span<ModelState* const> states, std::span<const std::span<const int32_t>> windows,
                                Logits mode, std::vector<float>& logits) {
  const int64_t B = int64_t(states.size()), H = cfg_.hidden_size, hc = cfg_.hc_mult;
  std::vector<State*> st(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b) st[size_t(b)] = &as_state(*states[size_t(b)]);
  logits.clear();
  if (B == 0) return;
  const std::vector<int64_t> first = window_starts(windows);
  const int64_t N = first.back();
  std::vector<float> x(size_t(N * hc * H)), tmp(size_t(N * hc * H));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < int64_t(windows[size_t(b)].size()); ++t) {
      float* row = x.data() + (first[size_t(b)] + t) * hc * H;
      dequantize_row(w_.embed, windows[size_t(b)][size_t(t)], row);
      for (int64_t s = 1; s < hc; ++s) std::copy_n(row, H, row + s * H);
    }
  std::vector<Selection> sel(static_cast<size_t>(B));  // per sequence, like forward()'s one
  std::vector<LayerSeq> seqs(static_cast<size_t>(B));
  for (int64_t l = 0; l < cfg_.num_hidden_layers; ++l) {
    const auto li = size_t(l);
    for (int64_t b = 0; b < B; ++b)
      seqs[size_t(b)] = {&st[size_t(b)]->kda[li], &st[size_t(b)]->mla[li], &sel[size_t(b)], st[size_t(b)]->pos,
                         int64_t(windows[size_t(b)].size())};
    decoder_layer_seqs(w_.layers[li], cfg_, seqs, x, tmp, &pool_);
  }
  std::vector<float> h(size_t(N * H));  // every row: the MTP head records them all
  hc_mean(cfg_, x.data(), N, w_.norm.data(), h.data());
  for (int64_t b = 0; b < B; ++b) {
    st[size_t(b)]->pos += int64_t(windows[size_t(b)].size());
    mtp_record(cfg_, *st[size_t(b)], windows[size_t(b)], h.data() + first[size_t(b)] * H);
  }
  const std::vector<int64_t> rows = logit_rows(first, mode);
  if (rows.empty()) return;
  std::vector<float> hr(rows.size() * size_t(H));
  gather_rows(h.data(), rows, H, hr.data());
  logits.resize(rows.size() * size_t(cfg_.vocab_size));
  matmul(w_.lm_head, hr.data(), int64_t(rows.size()), logits.data(), &pool_);
}

}  // namespace

std::vector<std::vector<float>> layer_outputs(Model& model, std::span<const int32_t> tokens) {
  auto* m = dynamic_cast<Glm5Model*>(&model);
  if (!m) throw Error("glm5::layer_outputs: not a glm5 model");
  std::vector<std::vector<float>> out;
  auto st = m->new_state();
  std::vector<float> logits;
  m->tap = &out;
  try {
    m->forward(*st, tokens, Logits::kNone, logits);
  } catch (...) {
    m->tap = nullptr;
    throw;
  }
  m->tap = nullptr;
  return out;
}

void mtp_draft_logits(Model& model, ModelState& state, int32_t next_token, int depth, std::vector<float>& logits,
                      std::vector<int32_t>& drafts) {
  auto* m = dynamic_cast<Glm5Model*>(&model);
  if (!m) throw Error("glm5::mtp_draft_logits: not a glm5 model");
  if (!m->draft_head()) throw InputError("glm5: this checkpoint has no MTP layer");
  m->draft(state, next_token, depth, drafts);
  logits = m->last_draft_logits();
}

bool probe(const std::string& path) {
  namespace fs = std::filesystem;
  if (fs::is_directory(path)) {
    std::ifstream f(fs::path(path) / "config.json");
    if (!f) return false;
    nlohmann::json j = nlohmann::json::parse(f, nullptr, /*allow_exceptions=*/false);
    return j.is_object() && is_glm5_type(j.value("model_type", std::string()));
  }
  if (fs::path(path).extension() != ".gguf") return false;
  auto src = open_tensor_source(path);
  const auto& m = src->metadata();
  return m.contains("general.architecture") && m["general.architecture"].is_string() &&
         is_glm5_type(m["general.architecture"].get<std::string>());
}

std::unique_ptr<Model> load_source(std::unique_ptr<TensorSource> src, const LoadOptions& options) {
  const auto& j = src->config();
  const std::string type = j.value("model_type", std::string());
  if (!is_glm5_type(type))
    throw InputError(src->path() + ": model_type '" + type + "' is not glm5_next");
  return std::make_unique<Glm5Model>(std::move(src), options);
}

std::unique_ptr<Model> load(const std::string& path, const LoadOptions& options) {
  return load_source(open_tensor_source(path), options);
}

}  // namespace ds4::glm5
