#pragma once
// The host side of the CUDA models' decode_batch (continuous batching, issue #24), shared by
// the three families: the checks made before anything runs, and the split of the rows into
// single-sequence steps and batched forwards of up to `most` rows. The forward itself (the
// chunk code with one state per row) is each model's batch.cu.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "models/draft_head.h"
#include "models/model.h"

namespace ds4 {

// The forwards of a batch, in order: consecutive items [b, e) (item i of rows[i] rows), each
// of at most most_items items and most_rows rows (an item of more rows alone), an item whose
// kind differs from its forward's first item starting the next one (kind empty: one kind).
inline std::vector<std::pair<size_t, size_t>> batch_forwards(std::span<const int64_t> rows, size_t most_items,
                                                             int64_t most_rows, std::span<const int> kind = {}) {
  std::vector<std::pair<size_t, size_t>> out;
  for (size_t b = 0, e = 0; b < rows.size(); b = e) {
    int64_t n = 0;
    for (e = b; e < rows.size() && e - b < std::max<size_t>(most_items, 1); ++e) {
      if (e > b && (n + rows[e] > most_rows || (!kind.empty() && kind[e] != kind[b]))) break;
      n += rows[e];
    }
    out.emplace_back(b, e);
  }
  return out;
}

// What decode_batch_rows asks of a CUDA model (State: its CudaState, with a host `pos`).
template <class State>
struct BatchHooks {
  State& (*state)(ModelState&);                        // the model's cuda_state
  std::function<bool(const State&)> single;            // runs as its own decode step
  std::function<void(size_t forwards)> begin;          // before the first batched forward
  // The pinned input row `row` of the state's next token (Qwen's PLE n-gram rows come from
  // the state's own token context).
  std::function<void(State&, int32_t token, int64_t row)> input;
  std::function<void(std::span<State* const>)> run;    // one batched forward, device counters += 1
  const float* logits = nullptr;                       // the pinned logits rows it leaves
};

// A CUDA model's decode_batch: checks everything first (check_decode_batch of model.h, the
// states' type), then runs the rows with single(state) true as the model's own one-token step
// (forward(kLast)), the others in order as batched forwards of up to `most` rows (a forward
// of one row runs as the step too: as fast, and no batch graph for it): their input rows,
// run(states), each state's host position += 1, the logits rows copied out. begin(F) is told
// the number of batched forwards first (the graph cache keeps 2 F). `logits`: {n, vocab}.
// The row sink (decode_batch_candidates, cuda_candidates.h) replaces the two ends that
// produce rows: alone(i) runs row i as its own step, taken(rows) takes a batched forward's
// results (rows[k] = the state index of forward row k) instead of the pinned rows copy; before(rows)
// runs after the forward's input rows are written, before it runs. Empty: decode_batch's rows.
struct BatchRowSink {
  std::function<void(size_t i)> alone;
  std::function<void(std::span<const size_t> rows)> before, taken;
};

template <class State>
void decode_batch_rows(Model& m, const std::string& family, std::span<ModelState* const> states,
                       std::span<const int32_t> tokens, size_t most, std::vector<float>& logits,
                       const BatchHooks<State>& h, const BatchRowSink& sink = {}) {
  const int64_t vocab = m.info().vocab_size;
  check_decode_batch(family + ": decode_batch", m.info(), states, tokens);
  std::vector<State*> sts;
  for (ModelState* s : states) sts.push_back(&h.state(*s));
  const size_t n = states.size(), V = size_t(vocab);
  logits.resize(n * V);
  std::vector<float> row;
  auto alone = [&](size_t i) {
    if (sink.alone) return sink.alone(i);
    m.forward(*states[i], tokens.subspan(i, 1), Logits::kLast, row);
    std::copy(row.begin(), row.end(), logits.begin() + long(i * V));
  };
  std::vector<size_t> batched;
  for (size_t i = 0; i < n; ++i) {
    if (h.single(*sts[i])) alone(i);
    else batched.push_back(i);
  }
  const std::vector<int64_t> ones(batched.size(), 1);
  const auto forwards = batch_forwards(ones, most, int64_t(std::max<size_t>(most, 1)));
  h.begin(forwards.size());
  for (const auto& [b0, b1] : forwards) {
    if (b1 - b0 == 1) {
      alone(batched[b0]);
      continue;
    }
    std::vector<State*> batch;
    for (size_t k = b0; k < b1; ++k) {
      h.input(*sts[batched[k]], tokens[batched[k]], int64_t(k - b0));
      batch.push_back(sts[batched[k]]);
    }
    const std::span<const size_t> rows = std::span<const size_t>(batched).subspan(b0, b1 - b0);
    if (sink.before) sink.before(rows);
    h.run(batch);
    for (size_t k = b0; k < b1; ++k) sts[batched[k]]->pos += 1;
    if (sink.taken) {
      sink.taken(rows);
      continue;
    }
    for (size_t k = b0; k < b1; ++k) std::copy_n(h.logits + (k - b0) * V, V, logits.begin() + long(batched[k] * V));
  }
}

// A CUDA model's verify_batch forwards (after captured_verify_batch's checks): states[i] fed
// windows[i] in forwards of at most `most_states` states and `most_rows` rows, states whose
// kind[i] (the draft head they record) differs in separate forwards: their input rows
// (h.input, windows stacked in order), run(states, window lengths), each state's host position
// += its window, its rows of h.logits copied to its stacked rows of `logits` ({rows, vocab}).
template <class State>
void verify_batch_rows(Model& m, std::span<ModelState* const> states, std::span<const std::span<const int32_t>> windows,
                       std::span<const int> kind, size_t most_states, int64_t most_rows, std::vector<float>& logits,
                       const BatchHooks<State>& h,
                       const std::function<void(std::span<State* const>, std::span<const int64_t>)>& run) {
  const size_t V = size_t(m.info().vocab_size);
  std::vector<int64_t> lens, first;  // rows of window i, its first stacked row
  int64_t total = 0;
  for (const auto& w : windows) first.push_back(total), lens.push_back(int64_t(w.size())), total += int64_t(w.size());
  logits.resize(size_t(total) * V);
  const auto forwards = batch_forwards(lens, most_states, most_rows, kind);
  h.begin(forwards.size());
  for (const auto& [b, e] : forwards) {
    std::vector<State*> sts;
    int64_t row = 0;
    for (size_t i = b; i < e; ++i) {
      sts.push_back(&h.state(*states[i]));
      for (int32_t tok : windows[i]) h.input(*sts.back(), tok, row++);
    }
    run(sts, std::span<const int64_t>(lens).subspan(b, e - b));
    row = 0;
    for (size_t i = b; i < e; ++i) {
      sts[i - b]->pos += lens[i];
      std::copy_n(h.logits + size_t(row) * V, size_t(lens[i]) * V, logits.begin() + long(size_t(first[i]) * V));
      row += lens[i];
    }
  }
}

// The rows of one state in a batched forward: rows r0 .. r0 + n - 1 are its consecutive tokens
// at its own positions (a chunk: one group of every row; decode_batch: one row per state;
// verify_batch: each state's verify window). Its stateful kernels launch once per group,
// exactly as a chunk of its n rows launches them.
template <class State>
struct RowGroupOf {
  State* st;
  int64_t r0, n;
};

// States sts[i] with lens[i] rows each, stacked in order.
template <class State>
std::vector<RowGroupOf<State>> stacked_groups(std::span<State* const> sts, std::span<const int64_t> lens) {
  std::vector<RowGroupOf<State>> groups;
  int64_t r0 = 0;
  for (size_t i = 0; i < sts.size(); ++i) groups.push_back(RowGroupOf<State>{sts[i], r0, lens[i]}), r0 += lens[i];
  return groups;
}

// decode_batch's groups: one row per state, in order.
template <class State>
std::vector<RowGroupOf<State>> one_row_groups(std::span<State* const> sts) {
  std::vector<RowGroupOf<State>> groups;
  for (State* s : sts) groups.push_back(RowGroupOf<State>{s, int64_t(groups.size()), 1});
  return groups;
}

// A decode batch's per-row state shifts (the models' chunk.cu seq_rows: Rows::shift / Rows::seq):
// bytes from row 0's state buffer to row i's, written at `shift_off` of row i's pinned input row
// (rows `row_bytes` apart), where the batch graph's input upload reads them at every replay.
template <class State>
void write_row_shifts(std::span<State* const> sts, void* pinned, size_t row_bytes, size_t shift_off) {
  const uint8_t* base = sts[0]->buf.template as<uint8_t>();
  for (size_t i = 0; i < sts.size(); ++i) {
    const int64_t shift = int64_t(sts[i]->buf.template as<uint8_t>() - base);
    std::memcpy(static_cast<uint8_t*>(pinned) + i * row_bytes + shift_off, &shift, sizeof shift);
  }
}

// The batch-graph key of a forward over `groups` (backend/cuda/batch_graphs.h): decode_batch's
// is the states' serials; a verify forward's adds a mark no serial takes and each window's
// length, so no decode key equals a verify key in the shared cache (the model may append
// more of what its graph holds).
template <class State>
std::vector<uint64_t> batch_graph_key(std::span<const RowGroupOf<State>> groups, bool verify) {
  std::vector<uint64_t> key;
  for (const auto& g : groups) key.push_back(g.st->serial);
  if (!verify) return key;
  key.push_back(~uint64_t(0));
  for (const auto& g : groups) key.push_back(uint64_t(g.n));
  return key;
}

// What a verify forward's captured launches read of a group's state besides its buffer (which
// its serial already names): `head`, the draft-head rows the forward records for it (a model's
// flags, e.g. MTP on; enable_draft and a restored checkpoint flip them on a state whose serial
// stays), and for a group of 2+ rows (the ones that record) its records buffer and that
// buffer's size (a model may replace the buffer, e.g. grow it, while the serial stays).
struct VerifyGraphDeps {
  uint64_t head = 0;
  const void* records = nullptr;
  uint64_t records_size = 0;
};

// The batch-graph key of a verify forward: batch_graph_key(groups, true), then each group's
// deps(*state) (VerifyGraphDeps), so a state whose flags or records buffer changed never
// replays a graph captured before the change. decode_batch keys need none of it: a state with
// a draft head on or a pending window runs alone (the models' BatchHooks::single).
template <class State, class Deps>
std::vector<uint64_t> verify_graph_key(std::span<const RowGroupOf<State>> groups, Deps&& deps) {
  std::vector<uint64_t> key = batch_graph_key<State>(groups, true);
  for (const auto& g : groups) {
    const VerifyGraphDeps d = deps(static_cast<const State&>(*g.st));
    key.push_back(d.head);
    key.push_back(g.n > 1 ? uint64_t(reinterpret_cast<uintptr_t>(d.records)) : 0);
    key.push_back(g.n > 1 ? d.records_size : 0);
  }
  return key;
}

// `flag` true for the scope (a model's `capturing` while a verify forward is enqueued), false
// after it however it ends.
class ScopedFlag {
 public:
  explicit ScopedFlag(bool& flag) : flag_(flag) { flag_ = true; }
  ~ScopedFlag() { flag_ = false; }
  ScopedFlag(const ScopedFlag&) = delete;
  ScopedFlag& operator=(const ScopedFlag&) = delete;

 private:
  bool& flag_;
};

// What cuda_verify_batch asks of a CUDA model besides its BatchHooks (State: its CudaState).
template <class State>
struct VerifyHooks {
  // The batch may run as stacked forwards (no layer observer / tap, a chunk scratch of 2+ rows).
  bool can_batch = false;
  int64_t most_window = 0;  // verify_capture's largest window (one recorded chunk); longer ones fall back
  size_t most_states = 0;  // states per forward (batch_rows)
  int64_t most_rows = 0;   // rows per forward (the chunk scratch's)
  // Before anything runs, for each state in order: refuse a pending captured window, make the
  // state's records ready for a window of `rows` tokens (the MTP queue's room, record buffers).
  std::function<void(State&, int64_t rows)> arm;
  std::function<int(const State&)> kind;  // the draft head the state records (forwards split by it); null: one kind
  std::function<void(std::span<const RowGroupOf<State>>)> run;  // one forward over the groups' rows (kAll logits)
  // After every forward: the state (its host position advanced by the window) keeps its window's
  // records for commit_prefix, as verify_capture leaves them.
  std::function<void(State&, std::span<const int32_t> window)> keep;
};

// A CUDA model's verify_batch (Model::verify_batch's contract): the checks (captured_verify_batch);
// the labelled fallback (verify_capture per window) where the batch cannot run stacked; else
// every state armed, the windows run as forwards of row groups (verify_batch_rows), every state
// keeps its records. Nothing to undo when a forward throws (keep never ran): the caller drops
// the states.
template <class State>
bool cuda_verify_batch(Model& m, const std::string& who, std::span<ModelState* const> states,
                       std::span<const std::span<const int32_t>> windows, std::vector<float>& logits,
                       const BatchHooks<State>& h, const VerifyHooks<State>& v) {
  bool batched = v.can_batch && v.most_rows >= 2;
  for (const auto& w : windows) batched = batched && (w.size() <= 1 || int64_t(w.size()) <= v.most_window);
  if (!batched) return m.Model::verify_batch(states, windows, logits);
  size_t armed = 0;  // captured_verify_batch arms states[0], states[1], ... in order
  return captured_verify_batch(
      m, states, windows, logits, who,
      [&](ModelState& s) {
        v.arm(h.state(s), int64_t(windows[armed].size()));
        ++armed;
      },
      [&] {
        std::vector<int> kind;
        if (v.kind)
          for (ModelState* s : states) kind.push_back(v.kind(h.state(*s)));
        verify_batch_rows<State>(m, states, windows, kind, v.most_states, v.most_rows, logits, h,
                                 [&](std::span<State* const> sts, std::span<const int64_t> lens) {
                                   v.run(stacked_groups<State>(sts, lens));
                                 });
      },
      [&](ModelState& s, std::span<const int32_t> w) { v.keep(h.state(s), w); }, [](ModelState&) {});
}

}  // namespace ds4
