// Batched speculative verify on the CUDA Qwen3.8 Flash Next model (issue #24; verify_batch.cu,
// the chunk code's row groups in chunk.cu / batch.cu). Plain executable (no GoogleTest on the
// H200 image); exits 1 when any check fails. tests/data/qwen_next tiny model (GDN layers, QSA
// layers 3 and 7, PLE on layer 2, MoE, MTP head). Every comparison is BIT-IDENTICAL (memcmp;
// tests/cuda/verify_batch_checks.h):
//  1. Six rounds of verify_batch over up to 8 states at positions 3..90 (7 drafting, one plain),
//     windows of 1..6 tokens, states joining and leaving: window i's rows = verify_capture of a
//     clone of states[i] on the same window; then both commit_prefix(keep), and the next decode
//     step, the next draft (depth 3) and the positions equal. On the default options (batch_rows
//     8: 8 states as one or several forwards), a 16-row chunk scratch (prefill_rows 0,
//     batch_rows 16: forwards cut by rows), direct launches (no graphs, batch_rows 512), and
//     tensor-core chunks from 8 rows (gemm_rows 8: the prompts' prefill takes the TF32 GEMMs,
//     the windows of 1..6 rows stay exact in the batch as alone).
//  2. A state holding an uncommitted captured window in the batch: verify_batch throws and no
//     state advances.
//  3. Then decode_batch on the same model (the verify graphs share its graph cache):
//     batch_test_util.h's batch_run, rows = each state's own decode step.
// Usage: test_qwen_next_verify_batch_cuda [root]
#include <cstdio>
#include <string>

#include "core/error.h"
#include "models/draft_head.h"
#include "models/qwen_next/cuda/model_cuda.h"
#include "batch_test_util.h"
#include "test_common.h"
#include "verify_batch_checks.h"

using namespace ds4;
using namespace ds4::cuda_test;

int main(int argc, char** argv) {
  const TestArgs args = parse_args(argc, argv);
  const std::string tiny = args.root + "/tests/data/qwen_next/model";
  try {
    LoadOptions o;
    qwen_next::CudaModelOptions served, small, direct, tc;
    small.prefill_rows = 0, small.batch_rows = 16;
    direct.graphs = false, direct.batch_rows = 512;
    tc.gemm_rows = 8;
    {
      auto m = qwen_next::load_cuda(tiny, o, served);
      check(m->draft_head() != nullptr, "the tiny model has its MTP head on the device");
      verify_rounds(*m, "default options");
      pending_window_throws(*m);
      batch_run(*m, "default options, after the verify batches");
    }
    for (const auto& [label, opt] : {std::pair<const char*, qwen_next::CudaModelOptions>{"16-row scratch", small},
                                     {"direct launches", direct}, {"tensor cores from 8 rows", tc}}) {
      auto m = qwen_next::load_cuda(tiny, o, opt);
      verify_rounds(*m, label);
    }
  } catch (const std::exception& e) {
    std::printf("FATAL %s\n", e.what());
    return 1;
  }
  return summary();
}
