#include "models/model.h"

#include <algorithm>
#include <cstdio>
#include <numeric>

#include "core/error.h"
#include "models/batch_rows.h"
#include "models/draft_head.h"

namespace ds4 {

std::vector<float> Model::prefill(ModelState& state, std::span<const int32_t> tokens, int64_t chunk) {
  if (chunk <= 0) chunk = info().default_prefill_chunk;
  std::vector<float> logits;
  for (size_t start = 0; start < tokens.size(); start += size_t(chunk)) {
    size_t n = std::min(size_t(chunk), tokens.size() - start);
    bool last = start + n == tokens.size();
    forward(state, tokens.subspan(start, n), last ? Logits::kLast : Logits::kNone, logits);
  }
  return logits;
}

void Model::forward_candidates(ModelState& state, std::span<const int32_t> tokens, const CandidateRequest& req,
                               SampleCandidates& out, std::vector<float>& logits, const NeedFull& need_full) {
  forward(state, tokens, Logits::kLast, logits);
  top_candidates(logits, req, out);
  need_full(out);  // the row is here anyway; keep it (a cached state's logits stay valid)
}

// The default batches (no weight sharing): forward(kLast) per sequence, rows concatenated.
void Model::forward_each(std::span<ModelState* const> states, std::span<const std::span<const int32_t>> windows,
                         std::vector<float>& logits) {
  const size_t V = size_t(info().vocab_size);
  logits.resize(states.size() * V);
  std::vector<float> row;
  for (size_t i = 0; i < states.size(); ++i) {
    forward(*states[i], windows[i], Logits::kLast, row);
    std::copy(row.begin(), row.end(), logits.begin() + long(i * V));
  }
}

void Model::decode_batch(std::span<ModelState* const> states, std::span<const int32_t> tokens,
                         std::vector<float>& logits) {
  check_decode_batch(info().family + ": decode_batch", info(), states, tokens);
  forward_each(states, one_token_windows(tokens), logits);
}

void Model::decode_batch_candidates(std::span<ModelState* const> states, std::span<const int32_t> tokens,
                                    std::span<const CandidateRequest> reqs, std::vector<SampleCandidates>& out,
                                    std::vector<float>& logits, const NeedFullRow& need_full) {
  if (reqs.size() != states.size())
    throw InputError(info().family + ": decode_batch_candidates: " + std::to_string(reqs.size()) +
                     " candidate requests for " + std::to_string(states.size()) + " states");
  decode_batch(states, tokens, logits);
  const size_t V = size_t(info().vocab_size);
  out.resize(states.size());
  for (size_t i = 0; i < states.size(); ++i) {
    if (reqs[i].k <= 0) continue;
    top_candidates(std::span<const float>(logits.data() + i * V, V), reqs[i], out[i]);
    need_full(i, out[i]);  // the row is here anyway
  }
}

void Model::prefill_batch(std::span<ModelState* const> states, std::span<const std::span<const int32_t>> windows,
                          std::vector<float>& logits) {
  check_batch(info().family + ": prefill_batch", info(), states, windows);
  forward_each(states, windows, logits);
}

bool Model::verify_batch(std::span<ModelState* const> states, std::span<const std::span<const int32_t>> windows,
                         std::vector<float>& logits) {
  check_batch(info().family + ": verify_batch", info(), states, windows);
  logits.clear();
  DraftHead* head = draft_head();
  if (!head) return false;
  // Fallback (no weight sharing): one captured verify per sequence, rows concatenated.
  std::vector<float> rows;
  for (size_t i = 0; i < states.size(); ++i) {
    if (!head->verify_capture(*states[i], windows[i], rows)) {
      if (i == 0) return false;  // the head cannot capture: nothing ran
      throw Error("verify_batch: the draft head captured some windows of a batch but not all");
    }
    logits.insert(logits.end(), rows.begin(), rows.end());
  }
  return true;
}

namespace {

// The first problem of one window ("" when none): the message is built only for a bad window,
// so a checked decode step allocates nothing.
std::string window_problem(const ModelInfo& info, int64_t position, std::span<const int32_t> tokens) {
  for (const int32_t t : tokens)
    if (t < 0 || t >= info.vocab_size)
      return "token id " + std::to_string(t) + " outside the vocabulary [0, " + std::to_string(info.vocab_size) + ")";
  if (position + int64_t(tokens.size()) > info.max_context)
    return "context full: position " + std::to_string(position) + " + " + std::to_string(tokens.size()) +
           " tokens > max_context " + std::to_string(info.max_context);
  return {};
}

}  // namespace

void check_window(const std::string& who, const ModelInfo& info, int64_t position, std::span<const int32_t> tokens) {
  const std::string problem = window_problem(info, position, tokens);
  if (!problem.empty()) throw InputError(who + ": " + problem);
}

void check_batch(const std::string& who, const ModelInfo& info, std::span<ModelState* const> states,
                 std::span<const std::span<const int32_t>> windows) {
  if (states.size() != windows.size())
    throw InputError(who + ": " + std::to_string(states.size()) + " states for " + std::to_string(windows.size()) +
                     " windows");
  for (size_t i = 0; i < states.size(); ++i) {
    std::string problem;
    if (!states[i]) problem = "the state is null";
    for (size_t o = 0; o < i && problem.empty(); ++o)
      if (states[o] == states[i])
        problem = "the state of window " + std::to_string(o) + " again (a batch holds distinct states)";
    if (problem.empty() && windows[i].empty()) problem = "no tokens";
    if (problem.empty()) problem = window_problem(info, states[i]->position(), windows[i]);
    if (!problem.empty()) throw InputError(who + ": window " + std::to_string(i) + ": " + problem);
  }
}

void check_decode_batch(const std::string& who, const ModelInfo& info, std::span<ModelState* const> states,
                        std::span<const int32_t> tokens) {
  if (states.size() != tokens.size())
    throw InputError(who + ": " + std::to_string(states.size()) + " states for " + std::to_string(tokens.size()) +
                     " tokens");
  check_batch(who, info, states, one_token_windows(tokens));
}

std::vector<float> Model::decode(ModelState& state, int32_t token) {
  std::vector<float> logits;
  forward(state, std::span<const int32_t>(&token, 1), Logits::kLast, logits);
  return logits;
}

std::vector<float> Model::verify(ModelState& state, std::span<const int32_t> tokens) {
  std::vector<float> logits;
  forward(state, tokens, Logits::kAll, logits);
  return logits;
}

void ModelState::save(std::vector<StateSection>&) const {
  throw Error("this model state does not support checkpoints (save)");
}

void ModelState::load(const std::vector<StateSection>&) {
  throw Error("this model state does not support checkpoints (load)");
}

namespace {
uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}
}  // namespace

const std::string& Model::fingerprint() {
  if (!fingerprint_.empty()) return fingerprint_;
  const ModelInfo& mi = info();
  std::string key = mi.family + "|" + mi.name + "|" + std::to_string(mi.vocab_size) + "|" +
                    std::to_string(mi.hidden_size) + "|" + std::to_string(mi.max_context);
  // Probe: a short fixed prompt through a fresh state; its top-16 token ranking depends on
  // every weight on the path, unlike metadata, which two fine-tunes share.
  std::vector<int32_t> probe;
  for (int32_t t : {1, 7, 42, 3, 100}) probe.push_back(int32_t(t % std::max<int64_t>(mi.vocab_size, 1)));
  auto st = new_state();
  const std::vector<float> logits = prefill(*st, probe);
  std::vector<int32_t> ids(logits.size());
  std::iota(ids.begin(), ids.end(), 0);
  const size_t k = std::min<size_t>(16, ids.size());
  std::partial_sort(ids.begin(), ids.begin() + long(k), ids.end(), [&](int32_t a, int32_t b) {
    return logits[size_t(a)] > logits[size_t(b)] || (logits[size_t(a)] == logits[size_t(b)] && a < b);
  });
  for (size_t i = 0; i < k; ++i) key += "," + std::to_string(ids[i]);
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(fnv1a(key)));
  fingerprint_ = mi.family + ":" + mi.name + ":" + hex;
  return fingerprint_;
}

}  // namespace ds4
