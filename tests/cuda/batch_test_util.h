#pragma once
// Continuous-batching checks shared by the CUDA models' batch tests
// (test_<family>_batch_cuda.cu). Every comparison is BIT-IDENTICAL (memcmp of logits rows):
// a decode_batch row must equal its state's own one-token decode step.
#include <cstring>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "models/draft_head.h"
#include "models/model.h"
#include "../support/batch_candidates_check.h"
#include "test_common.h"

namespace ds4::cuda_test {

inline bool same_row(const float* a, const float* b, size_t V) { return std::memcmp(a, b, V * sizeof(float)) == 0; }

// One sequence of a batch run: the batched state, its reference (stepped alone), its next token.
struct BatchSeq {
  std::unique_ptr<ModelState> s, ref;
  int32_t next = 0;
  bool live = true;
};

// A sequence after a prompt of `prompt_len` synthetic tokens (one forward: chunked prefill).
inline BatchSeq start_seq(Model& m, int64_t prompt_len, int64_t salt) {
  const int64_t V = m.info().vocab_size;
  BatchSeq q;
  q.s = m.new_state();
  std::vector<float> lg;
  const auto toks = synthetic_tokens(prompt_len, 31 + 2 * salt, 7 * salt + 3, V);
  m.forward(*q.s, toks, Logits::kLast, lg);
  q.ref = q.s->clone();
  q.next = argmax(lg.data(), V);
  return q;
}

// 24 greedy steps of decode_batch, each row compared with its reference state's decode step:
// five sequences of different prompt lengths, one joining at step 3, eleven at step 6 (17
// live), three at step 9 (20 live), three cancelled at step 12, down to 2 at step 15 and 1 at
// step 20. Greedy tokens, each from the sequence's own batched row. After the run every
// state's position equals its reference's.
inline void batch_run(Model& m, const std::string& label) {
  const size_t V = size_t(m.info().vocab_size);
  std::vector<BatchSeq> seqs;
  for (int64_t len : {1, 9, 23, 40, 70}) seqs.push_back(start_seq(m, len, int64_t(seqs.size())));
  bool ok = true;
  std::string first_bad;
  std::vector<size_t> sizes;
  for (int step = 0; step < 24 && ok; ++step) {
    if (step == 3) seqs.push_back(start_seq(m, 5, int64_t(seqs.size())));
    if (step == 6)
      for (int k = 0; k < 11; ++k) seqs.push_back(start_seq(m, 3 + 11 * k, int64_t(seqs.size())));
    if (step == 9)
      for (int k = 0; k < 3; ++k) seqs.push_back(start_seq(m, 50 + k, int64_t(seqs.size())));
    if (step == 12) seqs[1].live = seqs[4].live = seqs[7].live = false;
    if (step == 15)
      for (size_t i = 3; i < seqs.size(); ++i) seqs[i].live = false;
    if (step == 20) seqs[2].live = false;
    std::vector<ModelState*> states;
    std::vector<int32_t> toks;
    std::vector<BatchSeq*> live;
    for (BatchSeq& q : seqs)
      if (q.live) states.push_back(q.s.get()), toks.push_back(q.next), live.push_back(&q);
    if (live.empty()) break;
    sizes.push_back(live.size());
    std::vector<float> rows, alone;
    m.decode_batch(states, toks, rows);
    int bad = 0;  // rows of this step that differ (the first failing step is the last one run)
    for (size_t i = 0; i < live.size(); ++i) {
      m.forward(*live[i]->ref, std::span<const int32_t>(&toks[i], 1), Logits::kLast, alone);
      if (!same_row(rows.data() + i * V, alone.data(), V)) {
        if (ok)  // how far off says which kind of difference: a rounding flip (~1e-6) or a wrong input
          first_bad = "step " + std::to_string(step) + " row " + std::to_string(i) + " of " +
                      std::to_string(live.size()) + ", max |diff| " +
                      std::to_string(max_diff(rows.data() + i * V, alone.data(), V));
        ok = false;
        ++bad;
      }
      live[i]->next = argmax(rows.data() + i * V, int64_t(V));
    }
    if (bad) first_bad += ", " + std::to_string(bad) + " rows of the step differ";
  }
  bool pos_ok = true;
  for (const BatchSeq& q : seqs) pos_ok = pos_ok && q.s->position() == q.ref->position();
  std::string sz;
  for (size_t n : sizes) sz += (sz.empty() ? "" : ",") + std::to_string(n);
  check(ok && pos_ok, label + ": decode_batch rows = each state's own decode step, bit for bit, batch sizes " + sz +
                          (ok ? "" : " (first difference: " + first_bad + ")") + (pos_ok ? "" : " (positions differ)"));
}

// A state that consumed `prompt` (one forward), drafting on when `draft`.
inline std::unique_ptr<ModelState> prompted(Model& m, const std::vector<int32_t>& prompt, bool draft) {
  auto s = m.new_state();
  if (draft) m.draft_head()->enable_draft(*s);
  std::vector<float> lg;
  m.forward(*s, prompt, Logits::kNone, lg);
  return s;
}

// batch_run on a model loaded (load(options)) with each of `runs`: {label, options}.
template <class Options, class Load>
void batch_runs(const std::vector<std::pair<std::string, Options>>& runs, Load&& load) {
  for (const auto& [label, options] : runs) {
    auto m = load(options);
    batch_run(*m, label);
  }
}

// The same state twice, a token = vocab, 2 states for 1 token: each throws and no state advances.
inline void batch_bad_inputs(Model& m) {
  auto a = m.new_state(), b = m.new_state();
  std::vector<float> lg;
  m.forward(*a, std::vector<int32_t>{1, 2, 3}, Logits::kLast, lg);
  const int32_t V = int32_t(m.info().vocab_size);
  std::vector<ModelState*> twice = {a.get(), a.get()}, two = {a.get(), b.get()};
  const bool t1 = throws([&] { m.decode_batch(twice, std::vector<int32_t>{1, 2}, lg); });
  const bool t2 = throws([&] { m.decode_batch(two, std::vector<int32_t>{1, V}, lg); });
  const bool t3 = throws([&] { m.decode_batch(two, std::vector<int32_t>{1}, lg); });
  check(t1 && t2 && t3 && a->position() == 3 && b->position() == 0,
        "decode_batch: the same state twice, token = vocab, 2 states for 1 token throw; no state advanced");
}

// States `special` (made by the caller: draft-enabled, or holding a pending captured window)
// beside plain ones in one decode_batch for 4 steps: every row equals its state's own step
// (the special ones take the single-sequence step). refs: the references, clones stepped alone.
inline bool mixed_batch_equal(Model& m, const std::vector<ModelState*>& states,
                              std::vector<std::unique_ptr<ModelState>>& refs) {
  const int64_t V = m.info().vocab_size;
  refs.clear();
  for (ModelState* s : states) refs.push_back(s->clone());
  std::vector<float> rows, alone;
  bool ok = true;
  for (int step = 0; step < 4; ++step) {
    const std::vector<int32_t> toks = synthetic_tokens(int64_t(states.size()), 19, 3 + step, V);
    m.decode_batch(states, toks, rows);
    for (size_t i = 0; i < states.size(); ++i) {
      m.forward(*refs[i], std::span<const int32_t>(&toks[i], 1), Logits::kLast, alone);
      ok = ok && same_row(rows.data() + i * size_t(V), alone.data(), size_t(V));
    }
  }
  return ok;
}

// Two sessions speculating at once: states a (prompt 29) and b (prompt 46), made by `make`
// from their prompt, capture verify windows of 5 and 7 rows, both pending together (per-state
// records); a clone of a's pending window is taken; then, interleaved, a commits keep 2, b
// keep 6, the clone keep 4. Each must equal a reference that decoded only its kept tokens:
// 3 more decode steps bit for bit, and the positions; then extra(b, b's reference), when
// given, for the family's own checks (a draft-head model: the next draft).
inline void two_pending_windows(Model& m, DraftHead& h,
                                const std::function<std::unique_ptr<ModelState>(const std::vector<int32_t>&)>& make,
                                const std::string& label,
                                const std::function<bool(ModelState&, ModelState&)>& extra = nullptr) {
  const int64_t V = m.info().vocab_size;
  auto a = make(synthetic_tokens(29, 37, 11, V)), b = make(synthetic_tokens(46, 23, 4, V));
  const std::vector<int32_t> wa = synthetic_tokens(5, 7, 2, V), wb = synthetic_tokens(7, 11, 9, V);
  auto ra = a->clone(), rb = b->clone();
  std::vector<float> la, lb;
  const bool ca = h.verify_capture(*a, wa, la), cb = h.verify_capture(*b, wb, lb);
  auto a2 = a->clone();  // a pending window carries over with its records
  h.commit_prefix(*a, 2);
  h.commit_prefix(*b, 6);
  h.commit_prefix(*a2, 4);
  auto ra2 = ra->clone();
  for (int i = 0; i < 2; ++i) m.decode(*ra, wa[size_t(i)]);
  for (int i = 0; i < 6; ++i) m.decode(*rb, wb[size_t(i)]);
  for (int i = 0; i < 4; ++i) m.decode(*ra2, wa[size_t(i)]);
  bool ok = ca && cb;
  for (int32_t t : {3, 8, 1}) {
    ok = ok && m.decode(*a, t) == m.decode(*ra, t) && m.decode(*b, t) == m.decode(*rb, t) &&
         m.decode(*a2, t) == m.decode(*ra2, t);
  }
  if (extra) ok = ok && extra(*b, *rb);
  check(ok && a->position() == 29 + 2 + 3 && b->position() == 46 + 6 + 3 && a2->position() == 29 + 4 + 3,
        label + ": two states with captured verify windows pending at once (5 and 7 rows) commit keep 2 and 6, "
                "a clone of the first keep 4: each = decoding only its kept tokens (3 decode steps, bit for bit)");
}

// The checks on a model loaded with the default options: it declares batched_decode,
// batch_run, batch_bad_inputs, decode_batch_candidates (support/batch_candidates_check.h), and with `head` (the model as a DraftHead: verify_capture works
// without a draft head too) two_pending_windows on plain states.
inline void default_model_checks(Model& m, DraftHead* head) {
  check(m.info().batched_decode, "the CUDA model declares batched_decode (the engine calls decode_batch)");
  batch_run(m, "default options (batch_rows 16 for DeepSeek, 8 for GLM and Qwen)");
  batch_bad_inputs(m);
  // decode_batch_candidates: 17 sequences (forwards of batch_rows, the rest alone) and 3, each
  // row's device candidates and the rows handed back against its state stepped alone.
  for (int seqs : {17, 3}) {
    const std::string why = batch_candidates::run(m, seqs, 5);
    check(why.empty(), "decode_batch_candidates, " + std::to_string(seqs) + " sequences x 5 steps = each alone" +
                           (why.empty() ? "" : ": " + why));
  }
  const std::string bad = batch_candidates::bad_requests(m);
  check(bad.empty(), "decode_batch_candidates: a request count unlike the state count throws" +
                         (bad.empty() ? "" : ": " + bad));
  if (head)
    two_pending_windows(m, *head, [&](const std::vector<int32_t>& p) { return prompted(m, p, false); }, "plain states");
}

// A model with a draft head: draft-enabled states beside plain ones in one decode_batch
// (mixed_batch_equal; the next draft of the first equals its reference's), then
// two_pending_windows on draft-enabled states (the next draft of b equal too).
inline void draft_states_in_batches(Model& g, const std::string& label) {
  DraftHead& h = *g.draft_head();
  const int64_t V = g.info().vocab_size;
  {
    auto d1 = prompted(g, synthetic_tokens(20, 37, 11, V), true), d2 = prompted(g, synthetic_tokens(33, 41, 5, V), true);
    auto p1 = prompted(g, synthetic_tokens(12, 13, 1, V), false), p2 = prompted(g, synthetic_tokens(44, 17, 2, V), false);
    std::vector<std::unique_ptr<ModelState>> refs;
    const bool ok = mixed_batch_equal(g, {d1.get(), p1.get(), d2.get(), p2.get()}, refs);
    std::vector<int32_t> da, db;
    h.draft(*d1, 5, 3, da);
    h.draft(*refs[0], 5, 3, db);
    check(ok && da == db, label + ": draft-enabled and plain states in one decode_batch = their own steps (4 steps), "
                                  "the next draft equal");
  }
  two_pending_windows(g, h, [&](const std::vector<int32_t>& p) { return prompted(g, p, true); }, label + ", drafting",
                      [&](ModelState& b, ModelState& rb) {
                        std::vector<int32_t> x, y;
                        h.draft(b, 4, 2, x);
                        h.draft(rb, 4, 2, y);
                        return x == y;
                      });
}

}  // namespace ds4::cuda_test
