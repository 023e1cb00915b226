// Continuous batching on the CUDA Qwen3.8 Flash Next model (issue #24; batch.cu) and two
// sessions speculating at once (chunk.cu verify_capture: per-state records).
// Plain executable (no GoogleTest on the H200 image; no engine library either, as the other
// Qwen CUDA tests); exits 1 when any check fails.
// tests/data/qwen_next tiny model (GDN layers, QSA layers 3 and 7, PLE on layer 2, MoE, MTP
// head); every comparison is BIT-IDENTICAL (memcmp of logits, batch_test_util.h):
//  1. decode_batch rows = each state's own one-token decode step (a clone stepped alone), 24
//     steps, sequences of prompt lengths 1..113 (QSA blocks completing at different steps, the
//     indexer dropping blocks past position 36) joining and cancelling mid-run, batches of 1,
//     2, 5, 17 and 20 rows (17+: past gemv_rows' 16-row groups): default options (forwards of
//     batch_rows = 4: 17 rows as 4 x 4 + one alone); batch_rows 512 with tensor cores from 2
//     rows (gemm_rows 2: prefill chunks take the TF32 GEMMs, a batch never does); 16-row chunk
//     scratch (prefill_rows 0, batch_rows 16: 20 rows as 16 + 4); direct launches (no graph).
//     After the run every state's position is right.
//  2. Bad input: the same state twice, a token outside the vocabulary, a states / tokens count
//     mismatch throw and advance no state.
//  3. Two states hold captured verify windows (5 and 7 rows) at once; a clone of the first
//     carries its records; interleaved commits (keep 2, 6, 4) each equal a state that decoded
//     only its kept tokens (3 more decode steps, positions): plain states, and draft-enabled
//     ones (the next draft equal too).
//  4. Draft-enabled states (MTP ring) beside plain ones in one decode_batch (they take the
//     single step) equal their own steps; the next draft is equal.
// Usage: test_qwen_next_batch_cuda [root]
#include <cstdio>
#include <string>
#include <vector>

#include "core/error.h"
#include "models/draft_head.h"
#include "models/qwen_next/cuda/model_cuda.h"
#include "batch_test_util.h"
#include "test_common.h"

using namespace ds4;
using namespace ds4::cuda_test;

namespace {

std::unique_ptr<ModelState> prompted(Model& m, const std::vector<int32_t>& prompt, bool draft) {
  auto s = m.new_state();
  if (draft) m.draft_head()->enable_draft(*s);
  std::vector<float> lg;
  m.forward(*s, prompt, Logits::kNone, lg);
  return s;
}

// Items 3 (draft-enabled) and 4.
void with_mtp(Model& g) {
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
    check(ok && da == db, "MTP head: draft-enabled and plain states in one decode_batch = their own steps (4 steps), "
                          "the next draft equal");
  }
  two_pending_windows(g, h, [&](const std::vector<int32_t>& p) { return prompted(g, p, true); }, "MTP head on",
                      [&](ModelState& b, ModelState& rb) {
                        std::vector<int32_t> x, y;
                        h.draft(b, 4, 2, x);
                        h.draft(rb, 4, 2, y);
                        return x == y;
                      });
}

}  // namespace

int main(int argc, char** argv) {
  const TestArgs args = parse_args(argc, argv);
  const std::string tiny = args.root + "/tests/data/qwen_next/model";
  try {
    LoadOptions o;
    {
      auto m = qwen_next::load_cuda(tiny, o);
      check(m->info().batched_decode, "the CUDA model declares batched_decode (the engine calls decode_batch)");
      batch_run(*m, "default options (batch_rows 4)");
      batch_bad_inputs(*m);
      check(m->draft_head() != nullptr, "the tiny model has its MTP head on the device");
      if (DraftHead* h = m->draft_head()) {
        two_pending_windows(*m, *h, [&](const std::vector<int32_t>& p) { return prompted(*m, p, false); },
                            "plain states");
        with_mtp(*m);
      }
    }
    {
      qwen_next::CudaModelOptions c;
      c.batch_rows = 512, c.gemm_rows = 2;
      auto m = qwen_next::load_cuda(tiny, o, c);
      batch_run(*m, "batch_rows 512, tensor cores from 2 rows");
    }
    {
      qwen_next::CudaModelOptions c;
      c.prefill_rows = 0, c.batch_rows = 16;  // chunk scratch of 16 rows: batches of at most 16
      auto m = qwen_next::load_cuda(tiny, o, c);
      batch_run(*m, "16-row scratch");
    }
    {
      qwen_next::CudaModelOptions c;
      c.graphs = false, c.batch_rows = 512;
      auto m = qwen_next::load_cuda(tiny, o, c);
      batch_run(*m, "direct launches");
    }
  } catch (const std::exception& e) {
    std::printf("FATAL %s\n", e.what());
    return 1;
  }
  return summary();
}
