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
//     batch_rows = 8: 17 rows as 8 + 8 + one alone); batch_rows 512 with tensor cores from 2
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

int main(int argc, char** argv) {
  const TestArgs args = parse_args(argc, argv);
  const std::string tiny = args.root + "/tests/data/qwen_next/model";
  try {
    LoadOptions o;
    {
      auto m = qwen_next::load_cuda(tiny, o);
      check(m->draft_head() != nullptr, "the tiny model has its MTP head on the device");
      default_model_checks(*m, m->draft_head());
      if (m->draft_head()) draft_states_in_batches(*m, "MTP head");
    }
    qwen_next::CudaModelOptions many, small, direct;
    many.batch_rows = 512, many.gemm_rows = 2;
    small.prefill_rows = 0, small.batch_rows = 16;  // chunk scratch of 16 rows: batches of at most 16
    direct.graphs = false, direct.batch_rows = 512;
    batch_runs<qwen_next::CudaModelOptions>(
        {{"batch_rows 512, tensor cores from 2 rows", many}, {"16-row scratch", small}, {"direct launches", direct}},
        [&](const qwen_next::CudaModelOptions& c) { return qwen_next::load_cuda(tiny, o, c); });
  } catch (const std::exception& e) {
    std::printf("FATAL %s\n", e.what());
    return 1;
  }
  return summary();
}
