#pragma once
// Model::decode_batch_candidates against each sequence stepped alone, for any family and
// backend (the CPU models' default and the CUDA models' device candidates): no test framework,
// the functions return "" or the first difference, so a gtest (tests/unit/batching) and a plain
// CUDA test (tests/cuda) both call them.
//   - Row i's candidates are the host reference (top_candidates) of the row its state's own
//     one-token forward gives: argmax, finite count, ids and logit bits, over as many
//     candidates as the model handed back (>= min(k, finite)); exp_sum within a relative 1e-10
//     when a temperature asked for it (the device sums in another order).
//   - need_full is asked exactly once for every row with k > 0 and never for k == 0, and every
//     row it said yes to (and every k == 0 row) is handed back equal to the row alone, bit for bit.
// The requests cycle through k = 1, 20, 0 (the row wanted), 1024 with a temperature, 2000 (above
// the CUDA op: picked on the host) and 256 with a temperature; need_full says yes to every
// fourth row; greedy next tokens from the reference rows.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "models/model.h"
#include "models/sample_candidates.h"

namespace ds4::batch_candidates {

inline int32_t argmax_of(std::span<const float> row) {
  SampleCandidates c;
  top_candidates(row, 1, c);
  return c.argmax;
}

// Greedy prompt of `len` tokens for sequence `seed` (in range, varied).
inline std::vector<int32_t> prompt_tokens(int64_t vocab, int seed, int len) {
  std::vector<int32_t> t;
  for (int i = 0; i < len; ++i) t.push_back(int32_t((int64_t(seed) * 131 + int64_t(i) * 17 + 5) % vocab));
  return t;
}

inline CandidateRequest request_for(size_t i, int step) {
  static const CandidateRequest kinds[] = {{1, 0.0}, {20, 0.0}, {0, 0.0}, {1024, 0.8}, {2000, 0.0}, {256, 1.0}};
  return kinds[(i + size_t(step)) % 6];
}

inline std::string compare_candidates(const SampleCandidates& got, std::span<const float> row, const CandidateRequest& req) {
  SampleCandidates ref;
  const int64_t want = std::min<int64_t>(req.k, [&] {
    int64_t f = 0;
    for (float v : row) f += std::isfinite(v);
    return f;
  }());
  if (int64_t(got.ids.size()) < want || got.ids.size() != got.logits.size())
    return std::to_string(got.ids.size()) + " candidates, at least " + std::to_string(want) + " wanted";
  top_candidates(row, CandidateRequest{std::max<int>(req.k, int(got.ids.size())), req.exp_sum_temperature}, ref);
  if (got.argmax != ref.argmax) return "argmax " + std::to_string(got.argmax) + " vs " + std::to_string(ref.argmax);
  if (got.finite != ref.finite) return "finite " + std::to_string(got.finite) + " vs " + std::to_string(ref.finite);
  if (got.ids.size() > ref.ids.size()) return "more candidates than finite values";
  for (size_t k = 0; k < got.ids.size(); ++k)
    if (got.ids[k] != ref.ids[k] || std::memcmp(&got.logits[k], &ref.logits[k], sizeof(float)) != 0)
      return "candidate " + std::to_string(k) + ": id " + std::to_string(got.ids[k]) + " vs " + std::to_string(ref.ids[k]);
  if (req.exp_sum_temperature > 0 &&
      (std::isnan(got.exp_sum) != std::isnan(ref.exp_sum) ||
       std::fabs(got.exp_sum - ref.exp_sum) > 1e-10 * std::fabs(ref.exp_sum)))
    return "exp_sum " + std::to_string(got.exp_sum) + " vs " + std::to_string(ref.exp_sum);
  return "";
}

// `seqs` sequences (prompts of 1 + 7 i tokens) for `steps` steps of decode_batch_candidates,
// each against a clone of its state stepped alone.
inline std::string run(Model& m, int seqs, int steps) {
  const int64_t V = m.info().vocab_size;
  std::vector<std::unique_ptr<ModelState>> states, refs;
  std::vector<int32_t> next;
  for (int i = 0; i < seqs; ++i) {
    auto s = m.new_state();
    std::vector<float> lg;
    m.forward(*s, prompt_tokens(V, i, 1 + 7 * i), Logits::kLast, lg);
    next.push_back(argmax_of(lg));
    refs.push_back(s->clone());
    states.push_back(std::move(s));
  }
  std::vector<float> rows, alone;
  std::vector<SampleCandidates> out;
  for (int step = 0; step < steps; ++step) {
    std::vector<ModelState*> in;
    std::vector<CandidateRequest> reqs;
    for (int i = 0; i < seqs; ++i) in.push_back(states[size_t(i)].get()), reqs.push_back(request_for(size_t(i), step));
    std::vector<int> asked(size_t(seqs), 0);
    std::vector<bool> full(size_t(seqs), false);
    m.decode_batch_candidates(in, next, reqs, out, rows, [&](size_t i, const SampleCandidates&) {
      asked.at(i)++;
      full[i] = (i + size_t(step)) % 4 == 0;
      return bool(full[i]);
    });
    if (out.size() != size_t(seqs) || rows.size() != size_t(seqs) * size_t(V))
      return "step " + std::to_string(step) + ": " + std::to_string(out.size()) + " candidate sets, " +
             std::to_string(rows.size()) + " row floats";
    for (int i = 0; i < seqs; ++i) {
      const size_t u = size_t(i);
      const std::string at = "step " + std::to_string(step) + " row " + std::to_string(i) + " (k " +
                             std::to_string(reqs[u].k) + "): ";
      m.forward(*refs[u], std::span<const int32_t>(&next[u], 1), Logits::kLast, alone);
      if (asked[u] != (reqs[u].k > 0 ? 1 : 0)) return at + "need_full asked " + std::to_string(asked[u]) + " times";
      if (reqs[u].k > 0) {
        const std::string why = compare_candidates(out[u], alone, reqs[u]);
        if (!why.empty()) return at + why;
      }
      if ((reqs[u].k <= 0 || full[u]) && std::memcmp(rows.data() + u * size_t(V), alone.data(), size_t(V) * sizeof(float)))
        return at + "the row handed back differs from the row alone";
      next[u] = argmax_of(alone);
    }
  }
  for (int i = 0; i < seqs; ++i)
    if (states[size_t(i)]->position() != refs[size_t(i)]->position()) return "positions differ after the run";
  return "";
}

// A request count unlike the state count throws and advances no state.
inline std::string bad_requests(Model& m) {
  auto a = m.new_state(), b = m.new_state();
  std::vector<float> lg;
  m.forward(*a, std::vector<int32_t>{1, 2, 3}, Logits::kLast, lg);
  std::vector<ModelState*> two{a.get(), b.get()};
  std::vector<CandidateRequest> one{CandidateRequest{}};
  std::vector<SampleCandidates> out;
  bool threw = false;
  try {
    m.decode_batch_candidates(two, std::vector<int32_t>{1, 2}, one, out, lg, [](size_t, const SampleCandidates&) { return false; });
  } catch (const std::exception&) {
    threw = true;
  }
  if (!threw) return "one request for two states did not throw";
  if (a->position() != 3 || b->position() != 0) return "a state advanced";
  return "";
}

}  // namespace ds4::batch_candidates
