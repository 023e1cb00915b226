// Continuous batching on the CUDA DeepSeek V4 model (issue #24; batch.cu, spec_commit.cu).
// Plain executable (no GoogleTest on the H200 image); exits 1 when any check fails.
// tests/data/deepseek_v4 tiny model; every comparison is BIT-IDENTICAL (memcmp of logits):
//  1. decode_batch rows = each state's own one-token decode step (a clone stepped alone), over
//     24 steps with sequences of different prompt lengths (ring wrap, compressor windows
//     closing at different steps), sequences joining (prefilled, then added) and cancelling
//     (dropped) mid-run, batches of 1, 2, 5, 17 and 20 rows (17+: past gemv_rows' 16-row
//     groups and the tensor-core threshold, which a batch never takes): on the default options
//     (the served model: tensor cores on, forwards of batch_rows = 16: 20 rows as 16 + 4, 17 as
//     16 + one alone), with batch_rows 512 (every batch one forward), on 16-row chunk scratch
//     (prefill_rows 0, batch_rows 16: 20 rows run as 16 + 4, 17 as 16 + one alone) and with
//     direct launches on one stream (no graph, no side stream, batch_rows 512), and with the
//     stateful kernels launched per sequence (seq_launches off; on, the default everywhere else,
//     they are one launch over the batch's sequences, kernels.h Rows::shift); after the run
//     every state's position is right.
//  2. Bad input: the same state twice, a token outside the vocabulary, a states / tokens
//     count mismatch throw and advance no state.
//  3. MTP checkpoint (tests/data/deepseek_v4/mtp): draft-enabled states in a batch (they take
//     the single step) still equal their own steps; two states hold captured verify windows at
//     once (per-state records) and each commit (different keeps) equals a state that decoded
//     only its kept tokens; a clone of a pending window commits on its own records.
// Usage: test_deepseek_v4_batch_cuda [root]
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "core/error.h"
#include "models/deepseek_v4/cuda/model_cuda.h"
#include "models/draft_head.h"
#include "batch_test_util.h"
#include "draft_test_util.h"
#include "test_common.h"

using namespace ds4;
using namespace ds4::cuda_test;
namespace dsv4 = ds4::deepseek_v4;

namespace {

// Item 3: the MTP checkpoint.
void with_mtp(const std::string& root) {
  const std::string dir = draft_test::trunk_with_head_dir("ds4_cuda_batch_mtp", root + "/tests/data/deepseek_v4/model",
                                                          root + "/tests/data/deepseek_v4/mtp/mtp.safetensors");
  LoadOptions o;
  auto g = dsv4::load_cuda(dir, o);
  std::filesystem::remove_all(dir);
  draft_states_in_batches(*g, "MTP model");
}

}  // namespace

int main(int argc, char** argv) {
  const TestArgs args = parse_args(argc, argv);
  const std::string tiny = args.root + "/tests/data/deepseek_v4/model";
  try {
    LoadOptions o;
    {
      auto m = dsv4::load_cuda(tiny, o);  // the served options (tensor cores on for prefill chunks)
      default_model_checks(*m, nullptr);  // (captured windows: with_mtp)
    }
    dsv4::CudaModelOptions many, small, direct, per_seq;
    many.batch_rows = 512;
    small.prefill_rows = 0, small.batch_rows = 16;  // chunk scratch of 16 rows: batches of at most 16
    direct.graphs = false, direct.streams = false, direct.batch_rows = 512;
    per_seq.batch_rows = 512, per_seq.seq_launches = false;  // the stateful kernels launched per sequence
    batch_runs<dsv4::CudaModelOptions>({{"batch_rows 512 (one forward per batch)", many},
                                        {"16-row scratch", small},
                                        {"direct launches, one stream", direct},
                                        {"a launch per sequence (seq_launches off)", per_seq}},
                                       [&](const dsv4::CudaModelOptions& c) { return dsv4::load_cuda(tiny, o, c); });
    with_mtp(args.root);
  } catch (const std::exception& e) {
    std::printf("FATAL %s\n", e.what());
    return 1;
  }
  return summary();
}
