// Batched speculative verify on the CUDA GLM 5.x model (issue #24; verify_batch.cu, the row
// groups of chunk.cu / batch.cu, spec_commit.cu). Plain executable (no GoogleTest on the H200
// image); exits 1 when any check fails. tests/data/glm5 tiny model (KDA layers 0, 3, 4; MLA +
// DSA indexer layers 1, 2, 5; dense MLP 0-1, MoE 2-5) with its MTP head (tests/data/glm5/mtp).
// Every comparison is BIT-IDENTICAL (memcmp):
//  1. verify_batch_checks.h verify_rounds: six rounds of verify_batch over up to 8 states at
//     positions 3..90 (7 drafting, one plain), windows of 1..6 tokens and one of chunk_rows
//     (16) rows, states joining and leaving between rounds: window i's rows = verify_capture of
//     a clone of states[i]; then commit_prefix(keep) on both, and the next decode step's
//     logits, the next MTP draft (depth 3) and the positions equal. On:
//       - the served options (batch_rows 8: 8 states in one forward);
//       - batch_rows 3 (8 states as 3 + 3 + 2 forwards);
//       - a 16-row chunk scratch (prefill_rows 0, batch_rows 16: forwards cut by rows; the
//         16-row window alone);
//       - direct launches (no graphs, batch_rows 512).
//  2. A state holding an uncommitted captured window in the batch: verify_batch throws and no
//     state advances.
//  3. Then on the same model (served options: decode_batch and verify_batch share the graph
//     cache), batch_test_util.h's batch_run: decode_batch rows = each state's own decode step.
//  4. The tiny model without its head: verify_batch returns false and runs nothing.
// Usage: test_glm5_verify_batch_cuda [root]
#include <cstdio>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/error.h"
#include "models/draft_head.h"
#include "models/glm5/cuda/model_cuda.h"
#include "batch_test_util.h"
#include "draft_test_util.h"
#include "test_common.h"
#include "verify_batch_checks.h"

using namespace ds4;
using namespace ds4::cuda_test;

namespace {

// Item 4.
void no_head_returns_false(Model& m) {
  const int64_t V = m.info().vocab_size;
  auto a = prompted(m, synthetic_tokens(9, 5, 1, V), false), b = prompted(m, synthetic_tokens(14, 7, 2, V), false);
  std::vector<ModelState*> states = {a.get(), b.get()};
  const std::vector<int32_t> w = {1, 2, 3};
  const std::vector<std::span<const int32_t>> wins = {w, w};
  std::vector<float> lg = {1.f};
  const bool ran = m.verify_batch(states, wins, lg);
  check(!ran && lg.empty() && a->position() == 9 && b->position() == 14,
        "no draft head: verify_batch returns false, no logits, no state advanced");
}

}  // namespace

int main(int argc, char** argv) {
  const TestArgs args = parse_args(argc, argv);
  const std::string tiny = args.root + "/tests/data/glm5/model";
  try {
    LoadOptions o;
    const std::string dir = draft_test::trunk_with_head_dir("glm5_cuda_vbatch_mtp", tiny,
                                                            args.root + "/tests/data/glm5/mtp/mtp.safetensors");
    glm5::CudaModelOptions served, three, small, direct;
    three.batch_rows = 3;
    small.prefill_rows = 0, small.batch_rows = 16;
    direct.graphs = false, direct.batch_rows = 512;
    const int64_t long_window = served.chunk_rows;
    {
      auto m = glm5::load_cuda(dir, o, served);
      verify_rounds(*m, "MTP, served options", long_window);
      pending_window_throws(*m);
      batch_run(*m, "MTP, after the verify batches");
    }
    for (const auto& [label, opt] : {std::pair<std::string, glm5::CudaModelOptions>{"MTP, batch_rows 3", three},
                                     {"MTP, 16-row scratch", small},
                                     {"MTP, direct launches", direct}}) {
      auto m = glm5::load_cuda(dir, o, opt);
      verify_rounds(*m, label, long_window);
    }
    std::filesystem::remove_all(dir);
    auto plain = glm5::load_cuda(tiny, o);
    no_head_returns_false(*plain);
  } catch (const std::exception& e) {
    std::printf("FATAL %s\n", e.what());
    return 1;
  }
  return summary();
}
