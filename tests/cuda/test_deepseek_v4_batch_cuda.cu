// Continuous batching on the CUDA DeepSeek V4 model (issue #24; batch.cu, spec_commit.cu).
// Plain executable (no GoogleTest on the H200 image); exits 1 when any check fails.
// tests/data/deepseek_v4 tiny model; every comparison is BIT-IDENTICAL (memcmp of logits):
//  1. decode_batch rows = each state's own one-token decode step (a clone stepped alone), over
//     24 steps with sequences of different prompt lengths (ring wrap, compressor windows
//     closing at different steps), sequences joining (prefilled, then added) and cancelling
//     (dropped) mid-run, batches of 1, 2, 5, 17 and 20 rows (17+: past gemv_rows' 16-row
//     groups and the tensor-core threshold, which a batch never takes): on the default options
//     (the served model: tensor cores on, forwards of batch_rows = 4: 17 rows as 4 x 4 + one
//     alone), with batch_rows 512 (every batch one forward), on 16-row chunk scratch
//     (prefill_rows 0, batch_rows 16: 20 rows run as 16 + 4, 17 as 16 + one alone) and with
//     direct launches on one stream (no graph, no side stream, batch_rows 512); after the run
//     every state's position is right.
//  2. Bad input: the same state twice, a token outside the vocabulary, a states / tokens
//     count mismatch throw and advance no state.
//  3. MTP checkpoint (tests/data/deepseek_v4/mtp): draft-enabled states in a batch (they take
//     the single step) still equal their own steps; two states hold captured verify windows at
//     once (per-state records) and each commit (different keeps) equals a state that decoded
//     only its kept tokens; a clone of a pending window commits on its own records.
// Usage: test_deepseek_v4_batch_cuda [root]
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "core/error.h"
#include "models/deepseek_v4/cuda/model_cuda.h"
#include "models/draft_head.h"
#include "draft_test_util.h"
#include "test_common.h"

using namespace ds4;
using namespace ds4::cuda_test;
namespace dsv4 = ds4::deepseek_v4;

namespace {

bool same_row(const float* a, const float* b, size_t V) { return std::memcmp(a, b, V * sizeof(float)) == 0; }

// One sequence of the run: the batched state, its reference (stepped alone), its next token.
struct Seq {
  std::unique_ptr<ModelState> s, ref;
  int32_t next = 0;
  bool live = true;
};

Seq start(Model& m, int64_t prompt_len, int64_t salt) {
  const int64_t V = m.info().vocab_size;
  Seq q;
  q.s = m.new_state();
  std::vector<float> lg;
  const auto toks = synthetic_tokens(prompt_len, 31 + 2 * salt, 7 * salt + 3, V);
  m.forward(*q.s, toks, Logits::kLast, lg);
  q.ref = q.s->clone();
  q.next = argmax(lg.data(), V);
  return q;
}

// Item 1 on one model: `plan` = per step the sequences to start (prompt lengths) before it and
// the indices to cancel after it. Greedy tokens, each from the sequence's own batched row.
void batch_run(Model& m, const char* label) {
  const size_t V = size_t(m.info().vocab_size);
  std::vector<Seq> seqs;
  for (int64_t len : {1, 9, 23, 40, 70}) seqs.push_back(start(m, len, int64_t(seqs.size())));
  bool ok = true;
  std::string first_bad;
  std::vector<size_t> sizes;
  for (int step = 0; step < 24 && ok; ++step) {
    if (step == 3) seqs.push_back(start(m, 5, int64_t(seqs.size())));       // one joins
    if (step == 6)                                                           // eleven join: 17 live
      for (int k = 0; k < 11; ++k) seqs.push_back(start(m, 3 + 11 * k, int64_t(seqs.size())));
    if (step == 9)                                                           // three more: 20 live
      for (int k = 0; k < 3; ++k) seqs.push_back(start(m, 50 + k, int64_t(seqs.size())));
    if (step == 12) seqs[1].live = seqs[4].live = seqs[7].live = false;     // cancelled
    if (step == 15)                                                          // down to 2, then 1
      for (size_t i = 3; i < seqs.size(); ++i) seqs[i].live = false;
    if (step == 20) seqs[2].live = false;
    std::vector<ModelState*> states;
    std::vector<int32_t> toks;
    std::vector<Seq*> live;
    for (Seq& q : seqs)
      if (q.live) states.push_back(q.s.get()), toks.push_back(q.next), live.push_back(&q);
    if (live.empty()) break;
    sizes.push_back(live.size());
    std::vector<float> rows, alone;
    m.decode_batch(states, toks, rows);
    for (size_t i = 0; i < live.size(); ++i) {
      m.forward(*live[i]->ref, std::span<const int32_t>(&toks[i], 1), Logits::kLast, alone);
      if (!same_row(rows.data() + i * V, alone.data(), V) && ok) {
        ok = false;
        first_bad = "step " + std::to_string(step) + " row " + std::to_string(i) + " of " + std::to_string(live.size());
      }
      live[i]->next = argmax(rows.data() + i * V, int64_t(V));
    }
  }
  bool pos_ok = true;
  for (const Seq& q : seqs) pos_ok = pos_ok && q.s->position() == q.ref->position();
  std::string sz;
  for (size_t n : sizes) sz += (sz.empty() ? "" : ",") + std::to_string(n);
  check(ok && pos_ok, std::string(label) + ": decode_batch rows = each state's own decode step, bit for bit, batch sizes " +
                          sz + (ok ? "" : " (first difference: " + first_bad + ")") + (pos_ok ? "" : " (positions differ)"));
}

void bad_inputs(Model& m) {
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

// Item 3: the MTP checkpoint.
void with_mtp(const std::string& root) {
  const std::string dir = draft_test::trunk_with_head_dir("ds4_cuda_batch_mtp", root + "/tests/data/deepseek_v4/model",
                                                          root + "/tests/data/deepseek_v4/mtp/mtp.safetensors");
  LoadOptions o;
  auto g = dsv4::load_cuda(dir, o);
  std::filesystem::remove_all(dir);
  DraftHead& h = *g->draft_head();
  const int64_t V = g->info().vocab_size;
  // draft-enabled states beside plain ones in one batch
  {
    auto d1 = consumed(*g, synthetic_tokens(20, 37, 11, V)), d2 = consumed(*g, synthetic_tokens(33, 41, 5, V));
    auto p1 = g->new_state(), p2 = g->new_state();
    std::vector<float> lg, rows, alone;
    g->forward(*p1, synthetic_tokens(12, 13, 1, V), Logits::kLast, lg);
    g->forward(*p2, synthetic_tokens(44, 17, 2, V), Logits::kLast, lg);
    std::vector<ModelState*> states = {d1.get(), p1.get(), d2.get(), p2.get()};
    std::vector<std::unique_ptr<ModelState>> refs;
    for (ModelState* s : states) refs.push_back(s->clone());
    bool ok = true;
    for (int step = 0; step < 4; ++step) {
      const std::vector<int32_t> toks = synthetic_tokens(4, 19, 3 + step, V);
      g->decode_batch(states, toks, rows);
      for (size_t i = 0; i < states.size(); ++i) {
        g->forward(*refs[i], std::span<const int32_t>(&toks[i], 1), Logits::kLast, alone);
        ok = ok && same_row(rows.data() + i * size_t(V), alone.data(), size_t(V));
      }
    }
    std::vector<int32_t> da, db;
    h.draft(*d1, 5, 3, da);
    h.draft(*refs[0], 5, 3, db);
    check(ok && da == db, "MTP model: draft-enabled and plain states in one decode_batch = their own steps (4 steps), "
                          "the next draft equal");
  }
  // two pending captured windows at once, committed with different keeps
  {
    auto a = consumed(*g, synthetic_tokens(29, 37, 11, V)), b = consumed(*g, synthetic_tokens(46, 23, 4, V));
    const std::vector<int32_t> wa = synthetic_tokens(5, 7, 2, V), wb = synthetic_tokens(7, 11, 9, V);
    auto ra = a->clone(), rb = b->clone();
    std::vector<float> la, lb;
    const bool ca = h.verify_capture(*a, wa, la), cb = h.verify_capture(*b, wb, lb);
    auto a2 = a->clone();  // a pending window carries over with its records
    h.commit_prefix(*a, 2);
    h.commit_prefix(*b, 6);
    h.commit_prefix(*a2, 4);
    auto ra2 = ra->clone();
    for (int i = 0; i < 2; ++i) g->decode(*ra, wa[size_t(i)]);
    for (int i = 0; i < 6; ++i) g->decode(*rb, wb[size_t(i)]);
    for (int i = 0; i < 4; ++i) g->decode(*ra2, wa[size_t(i)]);
    bool ok = ca && cb;
    for (int32_t t : {3, 8, 1}) {
      ok = ok && g->decode(*a, t) == g->decode(*ra, t) && g->decode(*b, t) == g->decode(*rb, t) &&
           g->decode(*a2, t) == g->decode(*ra2, t);
    }
    std::vector<int32_t> x, y;
    h.draft(*b, 4, 2, x);
    h.draft(*rb, 4, 2, y);
    check(ok && x == y && a->position() == 29 + 2 + 3 && b->position() == 46 + 6 + 3,
          "MTP model: two states with captured verify windows pending at once (5 and 7 rows) commit keep 2 and 6, "
          "a clone of the first keep 4: each = decoding only its kept tokens (3 decode steps, next draft)");
  }
}

}  // namespace

int main(int argc, char** argv) {
  const TestArgs args = parse_args(argc, argv);
  const std::string tiny = args.root + "/tests/data/deepseek_v4/model";
  try {
    LoadOptions o;
    {
      auto m = dsv4::load_cuda(tiny, o);  // the served options (tensor cores on for prefill chunks)
      check(m->info().batched_decode, "the CUDA model declares batched_decode (the engine calls decode_batch)");
      batch_run(*m, "default options (batch_rows 4)");
      bad_inputs(*m);
    }
    {
      dsv4::CudaModelOptions c;
      c.batch_rows = 512;
      auto m = dsv4::load_cuda(tiny, o, c);
      batch_run(*m, "batch_rows 512 (one forward per batch)");
    }
    {
      dsv4::CudaModelOptions c;
      c.prefill_rows = 0, c.batch_rows = 16;  // chunk scratch of 16 rows: batches of at most 16
      auto m = dsv4::load_cuda(tiny, o, c);
      batch_run(*m, "16-row scratch");
    }
    {
      dsv4::CudaModelOptions c;
      c.graphs = false, c.streams = false, c.batch_rows = 512;
      auto m = dsv4::load_cuda(tiny, o, c);
      batch_run(*m, "direct launches, one stream");
    }
    with_mtp(args.root);
  } catch (const std::exception& e) {
    std::printf("FATAL %s\n", e.what());
    return 1;
  }
  return summary();
}
