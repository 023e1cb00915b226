// Continuous batching on the CUDA GLM 5.x model (issue #24; batch.cu) and two sessions
// speculating at once (spec_commit.cu: per-state verify records).
// Plain executable (no GoogleTest on the H200 image); exits 1 when any check fails.
// tests/data/glm5 tiny model (KDA layers 0, 3, 4; MLA + DSA indexer layers 1, 2, 5, layer 2
// sharing layer 1's selection; dense MLP layers 0-1, MoE 2-5); every comparison is
// BIT-IDENTICAL (memcmp of logits, batch_test_util.h):
//  1. decode_batch rows = each state's own one-token decode step (a clone stepped alone), 24
//     steps, sequences of prompt lengths 1..113 (pool boundaries at different steps) joining
//     and cancelling mid-run, batches of 1, 2, 5, 17 and 20 rows (17+: past gemv_rows'
//     16-row groups): default options (forwards of batch_rows = 8: 17 rows as 8 + 8 + one
//     alone); batch_rows 512 with tensor-core prefill chunks from 2 rows (gemm_rows 2: the
//     prompts prefill on tensor cores, a batch never does); 16-row chunk scratch
//     (prefill_rows 0, batch_rows 16: 20 rows as 16 + 4); direct launches (no graph); the
//     stateful kernels launched per sequence (seq_launches off; on, the default everywhere else,
//     they are one launch over the batch's sequences, kernels.h Rows::seq). After the run every
//     state's position is right.
//  2. Bad input: the same state twice, a token outside the vocabulary, a states / tokens count
//     mismatch throw and advance no state.
//  3. Two states hold captured verify windows (5 and 7 rows) at once; a clone of the first
//     carries its records; interleaved commits (keep 2, 6, 4) each equal a state that decoded
//     only its kept tokens (3 more decode steps, positions).
//  4. MTP checkpoint (tests/data/glm5/mtp): draft-enabled states beside plain ones in one
//     decode_batch (they take the single step) equal their own steps, and the next draft is
//     equal; two draft-enabled states with pending windows commit as in 3, next draft equal.
// Usage: test_glm5_batch_cuda [root]
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "core/error.h"
#include "models/draft_head.h"
#include "models/glm5/cuda/model_cuda.h"
#include "batch_test_util.h"
#include "draft_test_util.h"
#include "test_common.h"

using namespace ds4;
using namespace ds4::cuda_test;

namespace {

// Item 4: the MTP checkpoint.
void with_mtp(const std::string& root) {
  const std::string dir = draft_test::trunk_with_head_dir("glm5_cuda_batch_mtp", root + "/tests/data/glm5/model",
                                                          root + "/tests/data/glm5/mtp/mtp.safetensors");
  LoadOptions o;
  auto g = glm5::load_cuda(dir, o);
  std::filesystem::remove_all(dir);
  draft_states_in_batches(*g, "MTP model");
}

}  // namespace

int main(int argc, char** argv) {
  const TestArgs args = parse_args(argc, argv);
  const std::string tiny = args.root + "/tests/data/glm5/model";
  try {
    LoadOptions o;
    {
      auto m = glm5::load_cuda(tiny, o);
      default_model_checks(*m, dynamic_cast<DraftHead*>(m.get()));  // no draft head: captures all the same
    }
    glm5::CudaModelOptions many, small, direct, per_seq;
    many.batch_rows = 512, many.gemm_rows = 2;
    small.prefill_rows = 0, small.batch_rows = 16;  // chunk scratch of 16 rows: batches of at most 16
    direct.graphs = false, direct.batch_rows = 512;
    per_seq.batch_rows = 512, per_seq.seq_launches = false;  // the stateful kernels launched per sequence
    batch_runs<glm5::CudaModelOptions>({{"batch_rows 512, tensor-core prefill chunks from 2 rows", many},
                                        {"16-row scratch", small},
                                        {"direct launches", direct},
                                        {"a launch per sequence (seq_launches off)", per_seq}},
                                       [&](const glm5::CudaModelOptions& c) { return glm5::load_cuda(tiny, o, c); });
    with_mtp(args.root);
  } catch (const std::exception& e) {
    std::printf("FATAL %s\n", e.what());
    return 1;
  }
  return summary();
}
