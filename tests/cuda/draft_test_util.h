#pragma once
// Helpers of the CUDA draft-head tests (test_deepseek_v4_mtp_cuda, test_deepseek_v4_dspark_cuda):
// token rows, a drafting state fed in chosen forward sizes, and an error probe. The greedy
// speculative run and the trunk + head directory are tests/unit/common/draft_head_run.h.
#include <algorithm>
#include <cstdio>
#include <initializer_list>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/error.h"
#include "models/draft_head.h"
#include "models/model.h"
#include "test_common.h"
// tests/unit/common: the gtest-free draft-head scaffolding shared with the unit tests.
#include "../unit/common/draft_head_run.h"
#include "../unit/common/logit_agreement.h"

namespace ds4::cuda_test {

// A drafting state that consumed `toks`: in forwards of `chunk` tokens (0: one), then `steps`
// more of them one at a time.
inline std::unique_ptr<ModelState> consumed(Model& m, const std::vector<int32_t>& toks, size_t chunk = 0,
                                            size_t steps = 0) {
  auto st = m.new_state();
  m.draft_head()->enable_draft(*st);
  std::vector<float> lg;
  const size_t bulk = toks.size() - steps;
  if (!chunk) chunk = std::max<size_t>(bulk, 1);
  for (size_t i = 0; i < bulk; i += chunk)
    m.forward(*st, std::span<const int32_t>(toks.data() + i, std::min(chunk, bulk - i)), Logits::kNone, lg);
  for (size_t i = bulk; i < toks.size(); ++i) m.forward(*st, std::span<const int32_t>(&toks[i], 1), Logits::kNone, lg);
  return st;
}

// Captured-prefix commit at every keep: a base state (prompt of `len` synthetic tokens, drafting
// on, one draft done) verifies `window` through verify_capture, keeps 1..n rows, and must equal
// a clone that decoded only the kept tokens: verify rows = a plain kAll forward, positions,
// the head's next output (`head_same(trial, ref, token)`), 6 decode steps and the head's
// output after them. Returns "" or what differed first.
template <class HeadSame>
std::string commit_every_keep(Model& g, int64_t len, const std::vector<int32_t>& window, HeadSame head_same) {
  const int64_t V = g.info().vocab_size, n = int64_t(window.size());
  DraftHead& h = *g.draft_head();
  auto base = consumed(g, synthetic_tokens(len, 37, 11, V));
  std::vector<int32_t> d;
  h.draft(*base, 5, 2, d);
  std::vector<float> want_rows, rows;
  {
    auto plain = base->clone();
    g.forward(*plain, window, Logits::kAll, want_rows);
  }
  const std::vector<int32_t> cont = synthetic_tokens(6, 53, 7, V);
  for (int64_t keep = 1; keep <= n; ++keep) {
    const std::string at = " at keep " + std::to_string(keep);
    auto trial = base->clone();
    if (!h.verify_capture(*trial, window, rows)) return "verify_capture returned false";
    if (rows != want_rows) return "verify rows differ from a plain kAll forward";
    h.commit_prefix(*trial, keep);
    auto ref = base->clone();
    for (int64_t i = 0; i < keep; ++i) g.decode(*ref, window[size_t(i)]);
    if (trial->position() != len + keep) return "position " + std::to_string(trial->position()) + at;
    if (!head_same(*trial, *ref, cont[0])) return "next draft differs" + at;
    for (size_t i = 0; i < cont.size(); ++i)
      if (g.decode(*trial, cont[i]) != g.decode(*ref, cont[i])) return "decode " + std::to_string(i) + " differs" + at;
    if (!head_same(*trial, *ref, cont[1])) return "draft after the 6 decode steps differs" + at;
  }
  return "";
}

// Greedy speculative decoding on the CUDA model equals greedy AR (24 tokens after `prompt`, eos
// `eos`), at each depth with the head's own drafts (drafted > 0, every verify a prefix commit,
// no repair or replay) and with drafts forced to the AR continuation (accepted and bonus > 0);
// greedy AR on CUDA equals greedy AR on the CPU. `label` names the head in the check lines.
inline void speculative_equals_ar(Model& cpu, Model& gpu, const std::vector<int32_t>& prompt,
                                  std::initializer_list<int> depths, const char* label, int32_t eos = 1) {
  using draft_test::SpecRun;
  const SpecRun ar = draft_test::generate(gpu, prompt, 0, nullptr, eos),
                ar_cpu = draft_test::generate(cpu, prompt, 0, nullptr, eos);
  check(ar.tokens.size() == 24 && ar.tokens == ar_cpu.tokens, "greedy AR on CUDA = greedy AR on the CPU (24 tokens)");
  for (int depth : depths) {
    const SpecRun own = draft_test::generate(gpu, prompt, depth, nullptr, eos),
                  forced = draft_test::generate(gpu, prompt, depth, &ar.tokens, eos),
                  own_cpu = draft_test::generate(cpu, prompt, depth, nullptr, eos);
    const auto& s = own.stats;
    char buf[320];
    std::snprintf(buf, sizeof buf,
                  "%s depth %d on CUDA = greedy AR: %s; drafted %lld (CPU %lld), accepted %lld (CPU %lld), prefix "
                  "commits %lld, repairs %lld, full replays %lld",
                  label, depth, own.tokens == ar.tokens ? "yes" : "NO", (long long)s.drafted,
                  (long long)own_cpu.stats.drafted, (long long)s.accepted, (long long)own_cpu.stats.accepted,
                  (long long)s.prefix_commits, (long long)s.repairs, (long long)s.full_replays);
    check(own.tokens == ar.tokens && s.drafted > 0 && s.prefix_commits > 0 && s.repairs + s.full_replays == 0, buf);
    const auto& f = forced.stats;
    std::snprintf(buf, sizeof buf,
                  "%s depth %d, drafts forced to the AR continuation: = AR: %s; accepted %lld, bonus %lld, repairs "
                  "%lld, full replays %lld",
                  label, depth, forced.tokens == ar.tokens ? "yes" : "NO", (long long)f.accepted, (long long)f.bonus,
                  (long long)f.repairs, (long long)f.full_replays);
    check(forced.tokens == ar.tokens && f.accepted > 0 && f.bonus > 0 && f.repairs + f.full_replays == 0, buf);
  }
}

// Tensor-core prefill with the draft head on (issue #22). `tc` runs its prefill chunks on tensor
// cores; `prompt` has enough tokens for a tensor-core chunk. Checks:
//  - the prompt's logits (kAll) with the head on = without it, bit for bit: the head runs after
//    the trunk and writes only its own state;
//  - greedy speculative decoding after that prefill (head on) = greedy AR on the same model,
//    token for token, at each depth, with drafted > 0 and no repair or full replay: verify
//    windows and decode steps are exact, and verification keeps only what AR would emit, so the
//    head's tolerance-level drafts change how many are accepted, never the tokens.
inline void tc_prefill_speculative(Model& tc, const std::vector<int32_t>& prompt, std::initializer_list<int> depths,
                                   const std::string& label, int32_t eos = 1) {
  std::vector<float> with, without;
  {
    auto a = tc.new_state(), b = tc.new_state();
    tc.draft_head()->enable_draft(*a);
    tc.forward(*a, prompt, Logits::kAll, with);
    tc.forward(*b, prompt, Logits::kAll, without);
  }
  check(!with.empty() && with == without,
        label + ": " + std::to_string(prompt.size()) +
            "-token tensor-core prefill, logits (kAll) with the head on = without it, bit for bit");
  const draft_test::SpecRun ar = draft_test::generate(tc, prompt, 0, nullptr, eos);
  for (int depth : depths) {
    const draft_test::SpecRun own = draft_test::generate(tc, prompt, depth, nullptr, eos);
    const auto& s = own.stats;
    char buf[320];
    std::snprintf(buf, sizeof buf,
                  "%s: depth %d after the tensor-core prefill with the head on = greedy AR of the same model (%zu "
                  "tokens): %s; drafted %lld, accepted %lld, repairs %lld, full replays %lld",
                  label.c_str(), depth, ar.tokens.size(), own.tokens == ar.tokens ? "yes" : "NO", (long long)s.drafted,
                  (long long)s.accepted, (long long)s.repairs, (long long)s.full_replays);
    check(!ar.tokens.empty() && own.tokens == ar.tokens && s.drafted > 0 && s.repairs + s.full_replays == 0, buf);
  }
}

// A draft pick that returns want[0], want[1], ... whatever the row: two heads' chains compared
// row by row on the same inputs (a tolerance-level argmax flip would feed another token on).
inline std::function<int32_t(std::span<const float>)> forced_pick(const std::vector<int32_t>& want) {
  return [want, k = size_t(0)](std::span<const float>) mutable { return want[std::min(k++, want.size() - 1)]; };
}

// The head's bound after a tensor-core prefill, against the same head after the exact prefill:
// the trunk's own tensor-core criterion of the family (the head reads the trunk's rows, so it
// inherits their precision, and adds one layer of the same rounding): mean |diff| over every
// logit <= `mean`, and the same argmax wherever the exact row's top-2 margin exceeds `margin`.
struct HeadBound {
  float mean, margin;
};

// ref: the head's logits rows after the exact prefill, got: after the tensor-core one ({rows, V}).
inline void head_within(const std::string& what, const std::vector<float>& ref, const std::vector<float>& got,
                        int64_t V, const HeadBound& b) {
  if (ref.size() != got.size() || ref.empty() || ref.size() % size_t(V) != 0) {
    check(false, what + ": row counts differ");
    return;
  }
  const auto a = ds4_test::logit_agreement(ref.data(), got.data(), ref.size() / size_t(V), size_t(V), b.margin);
  ds4_test::print_agreement(what.c_str(), a);
  char buf[360];
  std::snprintf(buf, sizeof buf,
                "%s: mean |diff| %.3g (<= %.0e), p50 %.3g, max %.3g; argmax flips %d, %d where the exact margin > %.2g "
                "(must be 0)",
                what.c_str(), double(a.mean), double(b.mean), double(a.p50), double(a.max), a.flips, a.decided_flips,
                double(b.margin));
  check(a.mean <= b.mean && a.decided_flips == 0, buf);
}

}  // namespace ds4::cuda_test
