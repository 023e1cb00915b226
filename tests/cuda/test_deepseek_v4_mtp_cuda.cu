// ds4's MTP draft head and the captured-prefix commit of the CUDA DeepSeek V4 model (mtp.cu,
// spec_commit.cu) against the CPU model (mtp.cpp, spec_commit.cpp) and the reference vectors
// in tests/data/deepseek_v4/mtp. Plain executable (no GoogleTest on the H200 image); exits 1
// when any check fails. The tiny trunk + tests/data/deepseek_v4/mtp/mtp.safetensors:
//  1. The head exists on the GPU for an MTP checkpoint (and DSpark's for a DSpark checkpoint),
//     not for the plain trunk; bad draft inputs are InputErrors.
//  2. Draft logits {4, vocab} within kTol of the reference (cases p7h8 p64h65 p300h301), drafts
//     exact.
//  3. Depth 1..4 after three ways of consuming the same 64 tokens (one chunked forward; a
//     40-token forward then 24 decode steps; chunks of 5): ids = the CPU's mtp_draft ids, all
//     depth + 1 logits rows within kTol of the CPU's. Graph vs direct launches: bit-identical.
//  4. draft() and draft_picked() leave the state unchanged: the next decode logits and the next
//     draft are bit-identical to a clone that never drafted.
//  5. draft_picked with a 2nd-best pick: ids = the CPU's draft_picked ids.
//  6. verify_capture + commit_prefix(keep) for every keep in 1..n (windows of 4 and 16 rows,
//     prompts putting the window's fill edge, CSA closes and an HCA close inside the window):
//     the verify rows equal a plain kAll forward, and afterwards the next draft and 6 decode
//     steps are bit-identical to a state that consumed only the kept tokens by decode steps.
//     Bad keeps, a commit without a window, a second capture and a window past chunk_rows.
//  7. The greedy speculative loop (engine/speculative.h) on the CUDA model: output = greedy AR
//     token for token (and = the CPU's AR), drafted > 0, prefix commits > 0, repairs and full
//     replays 0; with drafts forced to the AR continuation: accepted > 0, bonus > 0.
//  8. Checkpoints with the head on (dsv4_checkpoint_test.h, 301 tokens): the head's ring and
//     mtp_last_y round-trip (GPU -> GPU bit-identical, GPU <-> CPU within kTol, drafts equal);
//     save during an uncommitted captured window throws, after commit_prefix it saves.
//  9. Tensor-core prefill with the head on (issue #22): a model with the default options (prefill
//     chunks on tensor cores) consumes p300 in one 300-row chunk, the head recording its rows
//     with the chunk's GEMMs. The head's chain with the exact model's draft ids forced
//     (draft_picked, last_picked_logits {3, vocab}: mtp_y and the head's ring) within the trunk's
//     criterion vs the exact model's (tests/unit/deepseek_v4/tc_criterion.h (b): mean, argmax
//     where the margin > 0.5); the prompt's logits with the head on = without, bit for bit; the
//     speculative loop after that prefill = greedy AR of that model (depths 1, 3).
// Usage: test_deepseek_v4_mtp_cuda [root] [--quick]
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "engine/speculative.h"
#include "formats/tensor_source.h"
#include "models/deepseek_v4/cuda/model_cuda.h"
#include "models/deepseek_v4/model.h"
#include "models/draft_head.h"
#include "draft_test_util.h"
#include "dsv4_checkpoint_test.h"
#include "test_common.h"
#include "../unit/deepseek_v4/tc_criterion.h"
// tests/unit/common: the gtest-free draft-head scaffolding shared with the unit tests.
#include "../unit/common/draft_head_run.h"

using namespace ds4;
using namespace ds4::cuda_test;
namespace dsv4 = ds4::deepseek_v4;
namespace fs = std::filesystem;

namespace {

constexpr float kTol = 1e-3f;  // tests/data/deepseek_v4/mtp/README.md: logits 1e-3, drafts exact

// <tmp>/<tag>_<pid>: the trunk's config.json (merged with `extra`, a JSON file or "") and
// model.safetensors next to the head file.
std::string head_dir(const std::string& root, const std::string& tag, const std::string& head, const std::string& extra = "") {
  return draft_test::trunk_with_head_dir(tag, root + "/tests/data/deepseek_v4/model", head, extra);
}

void heads(const std::string& root, Model& gpu) {
  check(gpu.draft_head() != nullptr && gpu.info().has_draft_head, "MTP checkpoint: the CUDA model has a draft head");
  LoadOptions o;
  auto plain = dsv4::load_cuda(root + "/tests/data/deepseek_v4/model", o);
  check(plain->draft_head() == nullptr && !plain->info().has_draft_head, "plain trunk: no draft head on CUDA");
  const std::string ds = root + "/tests/data/deepseek_v4/dspark";
  const std::string dir = head_dir(root, "ds4_cuda_dspark", ds + "/dspark.safetensors", ds + "/dspark_config.json");
  auto dspark = dsv4::load_cuda(dir, o);
  fs::remove_all(dir);
  check(dspark->draft_head() != nullptr && dspark->info().has_draft_head,
        "DSpark checkpoint: a draft head on CUDA too (DSpark's: test_deepseek_v4_dspark_cuda)");
}

// CPU mtp_draft's and enable_draft's errors, and the GPU chain's depth bound.
void bad_inputs(dsv4::DeepseekV4CudaModel& g) {
  const int32_t V = int32_t(g.info().vocab_size);
  std::vector<int32_t> d;
  auto off = g.new_state();
  auto on = consumed(g, {5, 6, 7});
  auto input_error = [](auto f) {
    try {
      f();
    } catch (const InputError&) {
      return true;
    } catch (...) {
    }
    return false;
  };
  const bool ok = input_error([&] { g.draft(*off, 0, 1, d); }) && input_error([&] { g.draft(*on, V, 1, d); }) &&
                  input_error([&] { g.draft(*on, 0, -1, d); }) && input_error([&] { g.draft(*on, 0, 17, d); }) &&
                  input_error([&] { g.enable_draft(*on); });
  check(ok, "InputError: draft without the head enabled, token = vocab, depth -1, depth 17 (> 16), enable after a forward");
}

void golden_drafts(dsv4::DeepseekV4CudaModel& g, const TensorSource& ref, bool quick) {
  for (const char* c : {"p7h8", "p64h65", "p300h301"}) {
    const std::string k = c;
    if (quick && k == "p300h301") continue;
    std::vector<int32_t> toks = golden<int32_t>(ref, k + ".tokens");
    toks.push_back(golden<int32_t>(ref, k + ".next_token")[0]);
    const auto want = golden<float>(ref, k + ".draft_logits");
    const auto want_d = golden<int32_t>(ref, k + ".drafts");
    auto st = consumed(g, toks);
    std::vector<float> lg;
    std::vector<int32_t> d;
    g.draft_logits(*st, want_d[0], 3, lg, d);
    const float diff = lg.size() == want.size() ? max_diff(lg.data(), want.data(), lg.size()) : INFINITY;
    char buf[200];
    std::snprintf(buf, sizeof buf, "reference %s: draft logits {4, vocab} max |diff| %.3g (tol %.0e), drafts exact: %s", c,
                  double(diff), double(kTol), d == std::vector<int32_t>(want_d.begin() + 1, want_d.end()) ? "yes" : "NO");
    check(diff <= kTol && d == std::vector<int32_t>(want_d.begin() + 1, want_d.end()), buf);
  }
}

void versus_cpu(Model& cpu, dsv4::DeepseekV4CudaModel& g, dsv4::DeepseekV4CudaModel& direct, const std::vector<int32_t>& toks) {
  const int32_t next = 321;
  auto sc = consumed(cpu, toks);
  struct Way {
    const char* name;
    size_t chunk, steps;
  };
  for (const Way& w : {Way{"one chunked forward", 0, 0}, Way{"40 tokens then 24 decode steps", 0, 24},
                       Way{"chunks of 5", 5, 0}}) {
    auto sg = consumed(g, toks, w.chunk, w.steps);
    auto sd = consumed(direct, toks, w.chunk, w.steps);
    for (int depth = 1; depth <= 4; ++depth) {
      std::vector<float> lc, lg, ld;
      std::vector<int32_t> dc, dg, dd;
      dsv4::mtp_draft_logits(cpu, *sc, next, depth, lc, dc);
      g.draft_logits(*sg, next, depth, lg, dg);
      direct.draft_logits(*sd, next, depth, ld, dd);
      const float diff = lg.size() == lc.size() ? max_diff(lg.data(), lc.data(), lc.size()) : INFINITY;
      char buf[300];
      std::snprintf(buf, sizeof buf,
                    "after %s: depth %d draft ids = CPU's: %s; %d logits rows max |diff| vs CPU %.3g (tol %.0e); graph = "
                    "direct launches bit for bit: %s",
                    w.name, depth, dg == dc ? "yes" : "NO", depth + 1, double(diff), double(kTol),
                    lg == ld && dg == dd ? "yes" : "NO");
      check(dg == dc && diff <= kTol && lg == ld && dg == dd, buf);
    }
  }
}

// Index of the second-largest logit (ties: the lower id first).
int32_t second_best(std::span<const float> row) {
  int32_t a = 0, b = -1;
  for (int32_t i = 1; i < int32_t(row.size()); ++i) {
    if (row[size_t(i)] > row[size_t(a)]) b = a, a = i;
    else if (b < 0 || row[size_t(i)] > row[size_t(b)]) b = i;
  }
  return b < 0 ? a : b;
}

void unchanged_and_picked(Model& cpu, dsv4::DeepseekV4CudaModel& g, const std::vector<int32_t>& toks) {
  const int32_t next = 77, after = 500;
  auto s = consumed(g, toks), c = s->clone();
  std::vector<int32_t> d, dp, dcpu;
  g.draft(*s, next, 4, d);
  g.draft_picked(*s, next, 4, second_best, dp);
  const auto ls = g.decode(*s, after), lc = g.decode(*c, after);
  std::vector<float> ds, dc;
  std::vector<int32_t> is, ic;
  g.draft_logits(*s, next, 3, ds, is);
  g.draft_logits(*c, next, 3, dc, ic);
  check(s->position() == c->position() && ls == lc && ds == dc && is == ic,
        "draft(depth 4) + draft_picked(depth 4) leave the state unchanged: next decode logits and next draft bit-identical "
        "to a clone that never drafted");
  auto sc = consumed(cpu, toks);
  cpu.draft_head()->draft_picked(*sc, next, 4, second_best, dcpu);
  check(dp == dcpu && dp.size() == 4, "draft_picked with the 2nd-best pick: ids = the CPU's draft_picked ids");
  check(d.size() == 4 && d != dp, "greedy and 2nd-best chains differ (the pick is used)");
}

// The depth-3 draft chain (logits and ids) after `tok` on two states, bit for bit.
bool head_logits_equal(dsv4::DeepseekV4CudaModel& g, ModelState& a, ModelState& b, int32_t tok) {
  std::vector<float> la, lb;
  std::vector<int32_t> ia, ib;
  g.draft_logits(a, tok, 3, la, ia);
  g.draft_logits(b, tok, 3, lb, ib);
  return la == lb && ia == ib;
}

// One base state and a window: every keep (draft_test_util.h commit_every_keep).
void commit_case(dsv4::DeepseekV4CudaModel& g, int64_t len, const std::vector<int32_t>& window) {
  const int64_t n = int64_t(window.size());
  const std::string bad = commit_every_keep(g, len, window, [&](ModelState& t, ModelState& r, int32_t tok) {
    return head_logits_equal(g, t, r, tok);
  });
  char buf[300];
  std::snprintf(buf, sizeof buf,
                "captured commit, prompt %lld, window %lld: every keep 1..%lld = decode steps over the kept tokens (next draft, "
                "6 decode steps, next draft again bit-identical)%s%s",
                (long long)len, (long long)n, (long long)n, bad.empty() ? "" : ": ", bad.c_str());
  check(bad.empty(), buf);
}

void commits(dsv4::DeepseekV4CudaModel& g, bool quick) {
  const int64_t V = g.info().vocab_size;
  const std::vector<int32_t> w4 = {17, 90, 3, 44}, w16 = synthetic_tokens(16, 29, 5, V);
  const std::vector<int64_t> lens = quick ? std::vector<int64_t>{14, 30} : std::vector<int64_t>{13, 14, 15, 16, 29, 30};
  for (int64_t len : lens) commit_case(g, len, w4);
  for (int64_t len : quick ? std::vector<int64_t>{13} : std::vector<int64_t>{1, 13, 30, 47}) commit_case(g, len, w16);
  auto s = consumed(g, synthetic_tokens(6, 37, 11, V));
  std::vector<float> rows;
  const bool none = throws([&] { g.commit_prefix(*s, 1); });
  const bool ok = g.verify_capture(*s, w4, rows);
  const bool k0 = throws([&] { g.commit_prefix(*s, 0); });
  const bool k5 = throws([&] { g.commit_prefix(*s, 5); });
  auto t = consumed(g, synthetic_tokens(6, 37, 11, V));
  g.verify_capture(*t, w4, rows);
  const bool twice = throws([&] { g.verify_capture(*t, w4, rows); });
  check(none && ok && k0 && k5 && twice,
        "commit without a window, keep 0, keep 5 of 4, and a second verify_capture over a pending window throw");
  auto u = consumed(g, synthetic_tokens(6, 37, 11, V));
  const bool long_window = g.verify_capture(*u, synthetic_tokens(17, 3, 1, V), rows);
  check(!long_window && u->position() == 6, "a window past chunk_rows (17 > 16) is not captured (state unchanged)");
}

void speculative(Model& cpu, Model& gpu, const std::vector<int32_t>& prompt) {
  speculative_equals_ar(cpu, gpu, prompt, {1, 3}, "speculative");
}

// Item 9: the head's chain after the same prompt on the exact and the tensor-core model, the
// exact model's greedy ids forced on both (a flipped draft would change the next row's input).
void tensor_core_prefill(dsv4::DeepseekV4CudaModel& exact, dsv4::DeepseekV4CudaModel& tc, const std::vector<int32_t>& toks) {
  const int32_t next = 321;
  constexpr int kDepth = 3;
  auto se = consumed(exact, toks), st = consumed(tc, toks);
  std::vector<int32_t> want, de, dt;
  exact.draft(*se, next, kDepth, want);
  std::vector<float> le, lt;
  exact.draft_picked(*se, next, kDepth, forced_pick(want), de);
  exact.last_picked_logits(kDepth, le);
  tc.draft_picked(*st, next, kDepth, forced_pick(want), dt);
  tc.last_picked_logits(kDepth, lt);
  head_within("MTP head after a " + std::to_string(toks.size()) +
                  "-row tensor-core prefill vs after the exact one (chain of 3, exact ids forced)",
              le, lt, exact.info().vocab_size,
              HeadBound{ds4_test::tc_criterion::kMean, ds4_test::tc_criterion::kMargin});
  std::vector<int32_t> own;
  tc.draft(*st, next, kDepth, own);
  std::printf("     MTP head after the tensor-core prefill: greedy draft ids %s the exact model's\n",
              own == want ? "equal" : "differ from");
  tc_prefill_speculative(tc, toks, {1, 3}, "MTP head");
}

}  // namespace

// A captured window's undo log lives in the model, not in the sections: save waits for the commit.
void save_during_capture(dsv4::DeepseekV4CudaModel& g, const std::vector<int32_t>& toks) {
  auto s = consumed(g, toks);
  std::vector<float> lg;
  std::vector<StateSection> out;
  const std::vector<int32_t> window(toks.begin(), toks.begin() + 4);
  const bool captured = g.verify_capture(*s, window, lg);
  const bool refused = captured && throws([&] { s->save(out); });
  if (captured) g.commit_prefix(*s, 2);
  out.clear();
  s->save(out);
  check(refused && !out.empty() && s->position() == int64_t(toks.size()) + 2,
        "save during an uncommitted captured window throws; after commit_prefix(2) it saves");
}

int main(int argc, char** argv) {
  const TestArgs args = parse_args(argc, argv);
  const std::string& root = args.root;
  try {
    const std::string dir =
        head_dir(root, "ds4_cuda_mtp", root + "/tests/data/deepseek_v4/mtp/mtp.safetensors");
    LoadOptions o;
    auto cpu = dsv4::load(dir, o);
    // The exact path (tensor_cores off): greedy and speculative runs are compared token for token
    // with the CPU; the tensor-core prefill is test_deepseek_v4_cuda's item 8.
    dsv4::CudaModelOptions exact, direct_exact{false, false, false, false};
    exact.tensor_cores = direct_exact.tensor_cores = false;
    auto gpu_m = dsv4::load_cuda(dir, o, exact);
    auto direct_m = dsv4::load_cuda(dir, o, direct_exact);
    fs::remove_all(dir);
    auto& gpu = dynamic_cast<dsv4::DeepseekV4CudaModel&>(*gpu_m);
    auto& direct = dynamic_cast<dsv4::DeepseekV4CudaModel&>(*direct_m);
    auto ref = open_tensor_source(root + "/tests/data/deepseek_v4/mtp/golden_mtp.safetensors");
    auto g = open_tensor_source(root + "/tests/data/deepseek_v4/golden.safetensors");
    const auto p64 = golden<int32_t>(*g, "p64.tokens");
    heads(root, gpu);
    bad_inputs(gpu);
    golden_drafts(gpu, *ref, args.quick);
    versus_cpu(*cpu, gpu, direct, p64);
    unchanged_and_picked(*cpu, gpu, p64);
    commits(gpu, args.quick);
    {
      auto p301 = golden<int32_t>(*g, "p300.tokens");  // 301 % 4 = 1, 301 % 16 = 13: windows open
      p301.push_back(p301[0]);
      checkpoint_round_trips(*cpu, gpu, p301,
                             CheckpointCase{"MTP head", 77, 4, kTol, "layer.3.comp.pend_kv", size_t(gpu.config().head_dim)});
      save_during_capture(gpu, p64);
    }
    if (!args.quick) speculative(*cpu, gpu, p64);
    {  // item 9: the default options (tensor-core prefill chunks)
      const std::string tdir = head_dir(root, "ds4_cuda_mtp_tc", root + "/tests/data/deepseek_v4/mtp/mtp.safetensors");
      auto tc_m = dsv4::load_cuda(tdir, o, dsv4::CudaModelOptions{});
      fs::remove_all(tdir);
      tensor_core_prefill(gpu, dynamic_cast<dsv4::DeepseekV4CudaModel&>(*tc_m), golden<int32_t>(*g, "p300.tokens"));
    }
  } catch (const std::exception& e) {
    std::printf("FATAL %s\n", e.what());
    return 2;
  }
  return summary();
}
