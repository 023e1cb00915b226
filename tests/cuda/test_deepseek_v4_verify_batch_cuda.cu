// Batched speculative verify on the CUDA DeepSeek V4 model (issue #24; verify_batch.cu, the
// chunk code's row groups in chunk.cu, spec_commit.cu). Plain executable (no GoogleTest on the
// H200 image); exits 1 when any check fails. Every comparison is BIT-IDENTICAL (memcmp):
//  1. Six rounds of verify_batch over up to 8 states at positions 3..90 (7 drafting, one plain:
//     its forwards apart, ModelInfo::batched_verify declared), windows of 1..6 tokens, states
//     joining and leaving between rounds and coming back in another order (new graph keys):
//     window i's rows = verify_capture of a clone of states[i] on the same window; then both
//     commit_prefix(keep) (keeps 1..n), and the next decode step's logits, the next draft
//     (depth 3) and the positions equal. On:
//       - the tiny model + ds4's MTP head, the served options (batch_rows 16: the 8 states in
//         one forward);
//       - the same, 16-row chunk scratch (prefill_rows 0, batch_rows 16: forwards cut by rows);
//       - the same, direct launches on one stream (graphs and side stream off, batch_rows 512);
//       - the tiny model + DSpark, the served options;
//       - the synthetic ds4-layout model + MTP (dsv4_actq_model.h), act_quant on and off, and
//         on with act_mma (the dense act products on gemv_act_mma; also item 3 on it).
//  2. A state holding an uncommitted captured window in the batch: verify_batch throws and no
//     state advances.
//  3. Then, on the same models (served options, MTP and DSpark: decode_batch and verify_batch
//     share the graph cache), batch_test_util.h's batch_run: decode_batch rows = each state's
//     own decode step over 24 steps of 1..20 sequences.
//  4. Loaded with chunk_rows 4 (capture records of 4 rows): set_options cannot raise chunk_rows to
//     16, a 6-row window is declined by verify_capture and verify_batch with nothing run, and the
//     model does not declare batched_verify (the engine then verifies each cycle alone).
// Usage: test_deepseek_v4_verify_batch_cuda [root]
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <unistd.h>

#include "core/error.h"
#include "models/deepseek_v4/cuda/model_cuda.h"
#include "models/draft_head.h"
#include "batch_test_util.h"
#include "verify_batch_checks.h"
#include "draft_test_util.h"
#include "dsv4_actq_model.h"
#include "test_common.h"

using namespace ds4;
using namespace ds4::cuda_test;
namespace dsv4 = ds4::deepseek_v4;

namespace {

// Item 1, and with `more` items 2 and 3.
template <class Load>
void on_model(const std::string& label, Load&& load, bool more = false) {
  auto m = load();
  verify_rounds(*m, label);
  if (!more) return;
  pending_window_throws(*m);
  batch_run(*m, label + ", after the verify batches");
}

}  // namespace

int main(int argc, char** argv) {
  const TestArgs args = parse_args(argc, argv);
  const std::string root = args.root, tiny = root + "/tests/data/deepseek_v4/model";
  const auto gguf = std::filesystem::temp_directory_path() / ("ds4_cuda_vbatch_" + std::to_string(::getpid()) + ".gguf");
  int rc = 0;
  try {
    LoadOptions o;
    const std::string mtp_dir = draft_test::trunk_with_head_dir("ds4_cuda_vbatch_mtp", tiny,
                                                                root + "/tests/data/deepseek_v4/mtp/mtp.safetensors");
    dsv4::CudaModelOptions served, small, direct;
    small.prefill_rows = 0, small.batch_rows = 16;
    direct.graphs = false, direct.streams = false, direct.batch_rows = 512;
    on_model("MTP, served options", [&] { return dsv4::load_cuda(mtp_dir, o, served); }, true);
    on_model("MTP, 16-row scratch", [&] { return dsv4::load_cuda(mtp_dir, o, small); });
    on_model("MTP, direct launches", [&] { return dsv4::load_cuda(mtp_dir, o, direct); });
    {  // item 4: capture records sized at load bound every later window
      dsv4::CudaModelOptions four, raised;
      four.chunk_rows = 4, four.prefill_rows = 64;
      raised = four, raised.chunk_rows = 16;
      auto m = dsv4::load_cuda(mtp_dir, o, four);
      auto& cm = dynamic_cast<dsv4::DeepseekV4CudaModel&>(*m);
      const int64_t V = m->info().vocab_size;
      check(throws([&] { cm.set_options(raised); }),
            "set_options cannot raise chunk_rows past the 4 rows of the states' capture records");
      auto s = prompted(*m, synthetic_tokens(12, 5, 1, V), true);
      std::vector<float> lg;
      const std::vector<int32_t> six = synthetic_tokens(6, 3, 1, V);
      const bool declined = !m->draft_head()->verify_capture(*s, six, lg) && s->position() == 12;
      std::vector<ModelState*> one = {s.get()};
      const std::vector<std::span<const int32_t>> wins = {six};
      const bool batch_declined = !m->verify_batch(one, wins, lg) && s->position() == 12;
      check(declined && batch_declined, "a 6-row window on 4-row capture records: verify_capture and verify_batch "
                                        "decline, nothing runs");
      check(!m->info().batched_verify, "4-row capture records do not hold every window the engine sends (depth "
                                       "up to 5): batched_verify is off, the engine verifies each cycle alone");
    }
    std::filesystem::remove_all(mtp_dir);
    const std::string ds = root + "/tests/data/deepseek_v4/dspark";
    const std::string dspark_dir = draft_test::trunk_with_head_dir("ds4_cuda_vbatch_dspark", tiny,
                                                                   ds + "/dspark.safetensors", ds + "/dspark_config.json");
    on_model("DSpark, served options", [&] { return dsv4::load_cuda(dspark_dir, o, served); }, true);
    std::filesystem::remove_all(dspark_dir);
    write_actq_model(root, gguf.string(), true);
    LoadOptions og;
    og.max_context = 1024;
    for (int v = 0; v < 3; ++v) {  // act_quant on (gemv_act), on with act_mma (gemv_act_mma), off
      dsv4::CudaModelOptions a;
      a.act_quant = v < 2;
      a.act_mma = v == 1;
      on_model(std::string("ds4-layout synthetic + MTP, act_quant ") + (v == 0 ? "on" : v == 1 ? "on + act_mma" : "off"),
               [&] { return dsv4::load_cuda(gguf.string(), og, a); }, v == 1);
    }
    rc = summary();
  } catch (const std::exception& e) {
    std::printf("FATAL %s\n", e.what());
    rc = 2;
  }
  std::filesystem::remove(gguf);
  return rc;
}
