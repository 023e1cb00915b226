#pragma once
// The checks of a CUDA model's Model::verify_batch (issue #24), the same for every family with a
// draft head: each state's rows, captured window and draft head bit for bit its own
// verify_capture's (tests/cuda/test_*_verify_batch_cuda.cu). Uses batch_test_util.h's
// prompted() and the tests' check() / throws().
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "batch_test_util.h"
#include "models/draft_head.h"
#include "models/model.h"
#include "test_common.h"

namespace ds4::cuda_test {

// Six rounds of verify_batch over up to 8 states at positions 3..90 (7 drafting, one plain: its
// forwards apart; ModelInfo::batched_verify declared), windows of 1..6 tokens, states joining
// and leaving between rounds and coming back in another order (new graph keys): window i's rows
// = verify_capture of a clone of states[i] on the same window (memcmp); then both
// commit_prefix(keep) (keeps 1..n), and the next decode step's logits, the next draft (depth 3)
// and the positions equal. m has a draft head.
inline void verify_rounds(Model& m, const std::string& label) {
  DraftHead& h = *m.draft_head();
  const int64_t V = m.info().vocab_size;
  check(m.info().batched_verify, label + ": the model declares batched_verify");
  std::vector<std::unique_ptr<ModelState>> seqs;
  const int64_t lens[] = {3, 17, 29, 40, 55, 64, 90, 21};
  for (size_t i = 0; i < 8; ++i)  // seq 7 plain (no draft head on): a forward of its own
    seqs.push_back(prompted(m, synthetic_tokens(lens[i], 31 + 2 * int64_t(i), 7 * int64_t(i) + 3, V), i < 7));
  const std::vector<std::vector<size_t>> live = {{0, 1, 2},    {0, 1, 2, 3, 4, 5, 6, 7}, {1, 3, 5},
                                                 {6, 5, 7, 4, 3, 2, 1, 0}, {0, 6},    {2, 3, 4, 5, 6}};
  bool ran = true, rows_ok = true, after_ok = true;
  std::string first;
  for (size_t round = 0; round < live.size(); ++round) {
    std::vector<ModelState*> states;
    std::vector<std::vector<int32_t>> wins;
    std::vector<std::unique_ptr<ModelState>> refs;
    for (size_t i : live[round]) {
      const int64_t n = 1 + int64_t((i + round) % 6);
      wins.push_back(synthetic_tokens(n, 13 + int64_t(i), 5 + int64_t(round), V));
      states.push_back(seqs[i].get());
      refs.push_back(seqs[i]->clone());
    }
    const std::vector<std::span<const int32_t>> spans(wins.begin(), wins.end());
    std::vector<float> rows, alone;
    ran = ran && m.verify_batch(states, spans, rows);
    size_t off = 0;
    for (size_t k = 0; k < states.size(); ++k) {
      const size_t n = wins[k].size();
      ran = ran && h.verify_capture(*refs[k], wins[k], alone);
      const bool same = rows.size() >= (off + n) * size_t(V) && alone.size() == n * size_t(V) &&
                        std::memcmp(rows.data() + off * size_t(V), alone.data(), alone.size() * sizeof(float)) == 0;
      if (!same && rows_ok)
        first = "round " + std::to_string(round) + " seq " + std::to_string(live[round][k]) + " (" +
                std::to_string(n) + " rows), max |diff| " +
                (alone.size() == n * size_t(V) && rows.size() >= (off + n) * size_t(V)
                     ? std::to_string(max_diff(rows.data() + off * size_t(V), alone.data(), alone.size()))
                     : std::string("(sizes differ)"));
      rows_ok = rows_ok && same;
      off += n;
    }
    rows_ok = rows_ok && rows.size() == off * size_t(V);
    for (size_t k = 0; k < states.size(); ++k) {
      const size_t i = live[round][k];
      const int64_t n = int64_t(wins[k].size()), keep = 1 + int64_t(i * 3 + round) % n;
      h.commit_prefix(*states[k], keep);
      h.commit_prefix(*refs[k], keep);
      const int32_t t = int32_t((7 * i + 3 * round + 1) % size_t(V));
      bool ok = m.decode(*states[k], t) == m.decode(*refs[k], t) && states[k]->position() == refs[k]->position();
      if (i < 7) {
        std::vector<int32_t> da, db;
        h.draft(*states[k], t, 3, da);
        h.draft(*refs[k], t, 3, db);
        ok = ok && da == db;
      }
      if (!ok && after_ok) first += " / after commit: round " + std::to_string(round) + " seq " + std::to_string(i);
      after_ok = after_ok && ok;
    }
  }
  check(ran && rows_ok && after_ok,
        label + ": verify_batch rows = each state's own verify_capture, commit_prefix(keep) then the next decode step, "
                "draft and position = the single path's (6 rounds, windows 1..6, states joining / leaving)" +
            (first.empty() ? "" : " (first difference: " + first + ")"));
}

// A state holding an uncommitted captured window in the batch: verify_batch throws and no state
// advances.
inline void pending_window_throws(Model& m) {
  DraftHead& h = *m.draft_head();
  const int64_t V = m.info().vocab_size;
  auto a = prompted(m, synthetic_tokens(12, 5, 1, V), true), b = prompted(m, synthetic_tokens(20, 9, 2, V), true);
  std::vector<float> lg;
  const std::vector<int32_t> w = {1, 2, 3};
  h.verify_capture(*a, w, lg);
  std::vector<ModelState*> states = {b.get(), a.get()};
  const std::vector<std::span<const int32_t>> wins = {w, w};
  const bool threw = throws([&] { m.verify_batch(states, wins, lg); });
  const int64_t pa = a->position(), pb = b->position();
  h.commit_prefix(*a, 1);
  check(threw && pa == 15 && pb == 20 && a->position() == 13,
        "verify_batch with a state holding an uncommitted captured window throws; no state advanced");
}

}  // namespace ds4::cuda_test
