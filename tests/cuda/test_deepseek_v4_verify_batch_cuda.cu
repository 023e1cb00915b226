// Batched speculative verify on the CUDA DeepSeek V4 model (issue #24; verify_batch.cu, the
// chunk code's row groups in chunk.cu, spec_commit.cu). Plain executable (no GoogleTest on the
// H200 image); exits 1 when any check fails. Every comparison is BIT-IDENTICAL (memcmp):
//  1. Six rounds of verify_batch over up to 8 states at positions 3..90 (7 drafting, one plain:
//     its forwards apart, ModelInfo::batched_verify declared), windows of 1..6 tokens, states
//     joining and leaving between rounds and coming back in another order (new graph keys):
//     window i's rows = verify_capture of a clone of states[i] on the same window; then both
//     commit_prefix(keep) (keeps 1..n), and the next decode step's logits, the next draft
//     (depth 3) and the positions equal. On:
//       - the tiny model + ds4's MTP head, the served options (batch_rows 4: 8 states run as
//         several forwards);
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
#include "draft_test_util.h"
#include "dsv4_actq_model.h"
#include "test_common.h"

using namespace ds4;
using namespace ds4::cuda_test;
namespace dsv4 = ds4::deepseek_v4;

namespace {

// Item 1 on a model with a draft head.
void verify_rounds(Model& m, const std::string& label) {
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

// Item 2.
void pending_window_throws(Model& m) {
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
