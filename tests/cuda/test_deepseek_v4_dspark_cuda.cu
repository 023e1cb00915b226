// MTPLX's DSpark block drafter on the CUDA DeepSeek V4 model (dspark.cu, spec_commit.cu)
// against the CPU model (dspark.cpp, spec_commit.cpp) and the reference vectors in
// tests/data/deepseek_v4/dspark (README.md there: logits 1e-3, drafts exact, confidences 1e-4,
// gate prefixes exact). Plain executable (no GoogleTest on the H200 image); exits 1 when any
// check fails. The tiny trunk + dspark.safetensors, dspark_config.json merged into config.json:
//  1. The drafter exists on the GPU (draft_head, has_draft_head); draft_picked declines (a
//     greedy block proposal, as on the CPU); bad inputs are InputErrors.
//  2. Reference cases p1 p7 p64 p300: K5 logits {5, vocab}, drafts, confidences and the gate
//     prefixes at 0.6 / 0.8.
//  3. Versus the CPU model after several prompts consumed three ways (one chunked forward; all
//     but the last 9 (at most n - 1) tokens, then those as decode steps; chunks of 5): drafts equal, confidences within 1e-4,
//     logits within kTol; graph vs direct launches bit-identical.
//  4. The gate (0, 0.6, 0.8, 1.0) and the depth cut (1, 3, 5, 7) through DraftHead::draft: the
//     CPU's drafts exactly.
//  5. draft() leaves the state unchanged: the next decode logits and the next K5 pass are
//     bit-identical to a clone that never drafted.
//  6. verify_capture + commit_prefix(keep) for every keep (windows of 4 and 16 rows, prompts on
//     both sides of the 16-row DSpark window): the next K5 pass and 6 decode steps are
//     bit-identical to a state that consumed only the kept tokens by decode steps.
//  7. The greedy speculative loop (engine/speculative.h) on the CUDA model, depths 1 and 4:
//     output = greedy AR token for token, drafted > 0, prefix commits > 0, repairs and full
//     replays 0; with drafts forced to the AR continuation: accepted > 0, bonus > 0.
//  8. Checkpoints with the drafter on (dsv4_checkpoint_test.h, 301 tokens): the stage rings
//     round-trip (GPU -> GPU bit-identical, GPU <-> CPU within kTol, all 5 drafts equal).
//  9. Tensor-core prefill with the drafter on (issue #22): a model with the default options
//     consumes 300 tokens in one 300-row tensor-core chunk, the stage rings recorded with the
//     chunk's GEMMs. The K5 pass's logits vs the exact model's after the same prompt, rows up
//     to the first differing draft (a row's Markov bias reads the previous draft), within the
//     trunk's criterion (tests/unit/deepseek_v4/tc_criterion.h (b)); the prompt's logits with
//     the drafter on = without, bit for bit; the speculative loop after that prefill = greedy
//     AR of that model (depths 1, 4).
// Usage: test_deepseek_v4_dspark_cuda [root] [--quick]
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

constexpr float kTol = 1e-3f;      // README: max |draft logit diff| <= 1e-3
constexpr float kConfTol = 1e-4f;  // README: |confidence diff| <= 1e-4

// <tmp>/<tag>_<pid>: the trunk's config.json merged with dspark_config.json, model.safetensors
// and dspark.safetensors.
std::string dspark_dir(const std::string& root) {
  const std::string ds = root + "/tests/data/deepseek_v4/dspark";
  return draft_test::trunk_with_head_dir("ds4_cuda_dspark", root + "/tests/data/deepseek_v4/model",
                                         ds + "/dspark.safetensors", ds + "/dspark_config.json");
}

struct K5 {
  std::vector<float> logits, conf;
  std::vector<int32_t> drafts;
};

K5 gpu_k5(dsv4::DeepseekV4CudaModel& g, ModelState& st, int32_t primary) {
  K5 o;
  g.dspark_draft_details(st, primary, o.logits, o.drafts, o.conf);
  return o;
}

// The CPU's pass (dspark_draft_details drafts ungated: all five).
K5 cpu_k5(Model& cpu, ModelState& st, int32_t primary) {
  K5 o;
  dsv4::dspark_draft_details(cpu, st, primary, o.logits, o.drafts, o.conf);
  return o;
}

bool same(const K5& a, const K5& b) { return a.logits == b.logits && a.drafts == b.drafts && a.conf == b.conf; }

int gate_prefix(const std::vector<float>& conf, float t) {
  int k = 0;
  while (k < int(conf.size()) && conf[size_t(k)] >= t) ++k;
  return k;
}

void heads_and_inputs(dsv4::DeepseekV4CudaModel& g) {
  check(g.draft_head() != nullptr && g.info().has_draft_head, "DSpark checkpoint: the CUDA model has a draft head");
  const int32_t V = int32_t(g.info().vocab_size);
  auto on = consumed(g, {5, 6, 7});
  std::vector<int32_t> d = {9};
  const bool declined = !g.draft_picked(*on, 3, 2, [](std::span<const float>) { return int32_t(0); }, d);
  check(declined && d == std::vector<int32_t>{9}, "draft_picked declines on DSpark (drafts untouched), as the CPU");
  auto input_error = [](auto f) {
    try {
      f();
    } catch (const InputError&) {
      return true;
    } catch (...) {
    }
    return false;
  };
  auto off = g.new_state(), empty = g.new_state();
  g.enable_draft(*empty);
  std::vector<float> lg, conf;
  const bool ok = input_error([&] { g.draft(*off, 0, 2, d); }) && input_error([&] { g.draft(*empty, 0, 2, d); }) &&
                  input_error([&] { g.draft(*on, V, 2, d); }) && input_error([&] { g.draft(*on, -1, 2, d); }) &&
                  input_error([&] { g.draft(*on, 0, -1, d); }) && input_error([&] { g.enable_draft(*on); }) &&
                  input_error([&] { g.dspark_draft_details(*off, 0, lg, d, conf); }) &&
                  input_error([&] { g.draft_logits(*on, 0, 1, lg, d); });
  check(ok, "InputError: draft without the drafter, with no consumed token, token = vocab / -1, depth -1, enable after a "
            "forward, details without the drafter, MTP draft_logits on DSpark");
}

void golden_cases(dsv4::DeepseekV4CudaModel& g, const TensorSource& ref, bool quick) {
  for (const char* c : {"p1", "p7", "p64", "p300"}) {
    const std::string k = c;
    if (quick && k == "p300") continue;
    auto st = consumed(g, golden<int32_t>(ref, k + ".tokens"));
    const K5 o = gpu_k5(g, *st, golden<int32_t>(ref, k + ".primary")[0]);
    const auto want = golden<float>(ref, k + ".draft_logits"), conf = golden<float>(ref, k + ".confidence");
    const auto prefix = golden<int32_t>(ref, k + ".gate_prefix");
    const float diff = o.logits.size() == want.size() ? max_diff(o.logits.data(), want.data(), want.size()) : INFINITY;
    const float cdiff = o.conf.size() == conf.size() ? max_diff(o.conf.data(), conf.data(), conf.size()) : INFINITY;
    const bool ids = o.drafts == golden<int32_t>(ref, k + ".drafts");
    const bool gates = gate_prefix(o.conf, 0.6f) == prefix[0] && gate_prefix(o.conf, 0.8f) == prefix[1];
    char buf[300];
    std::snprintf(buf, sizeof buf,
                  "reference %s: K5 logits {5, vocab} max |diff| %.3g (tol %.0e), confidences max |diff| %.3g (tol %.0e), "
                  "drafts exact: %s, gate prefixes 0.6 / 0.8 exact: %s",
                  c, double(diff), double(kTol), double(cdiff), double(kConfTol), ids ? "yes" : "NO", gates ? "yes" : "NO");
    check(diff <= kTol && cdiff <= kConfTol && ids && gates, buf);
  }
}

void versus_cpu(Model& cpu, dsv4::DeepseekV4CudaModel& g, dsv4::DeepseekV4CudaModel& direct,
                const std::vector<std::vector<int32_t>>& prompts) {
  struct Way {
    const char* name;
    size_t chunk, steps;
  };
  const int32_t primary = 321;
  for (const auto& toks : prompts) {
    auto sc = consumed(cpu, toks);
    const K5 want = cpu_k5(cpu, *sc, primary);
    for (const Way& w : {Way{"one chunked forward", 0, 0}, Way{"then 9 decode steps", 0, 9}, Way{"chunks of 5", 5, 0}}) {
      const size_t steps = std::min(w.steps, toks.size() - 1);
      auto sg = consumed(g, toks, w.chunk, steps);
      auto sd = consumed(direct, toks, w.chunk, steps);
      const K5 o = gpu_k5(g, *sg, primary), od = gpu_k5(direct, *sd, primary);
      const float diff = o.logits.size() == want.logits.size()
                             ? max_diff(o.logits.data(), want.logits.data(), want.logits.size()) : INFINITY;
      const float cdiff = o.conf.size() == want.conf.size() ? max_diff(o.conf.data(), want.conf.data(), 5) : INFINITY;
      char buf[300];
      std::snprintf(buf, sizeof buf,
                    "prompt %zu tokens, %s: drafts = CPU's: %s; logits max |diff| %.3g (tol %.0e), confidences %.3g (tol "
                    "%.0e); graph = direct launches bit for bit: %s",
                    toks.size(), w.name, o.drafts == want.drafts ? "yes" : "NO", double(diff), double(kTol), double(cdiff),
                    double(kConfTol), same(o, od) ? "yes" : "NO");
      check(o.drafts == want.drafts && diff <= kTol && cdiff <= kConfTol && same(o, od), buf);
    }
  }
}

// DraftHead::draft with the gate and depth cut (CPU model.cpp draft()) on both models.
void gates(Model& cpu, dsv4::DeepseekV4CudaModel& g, const TensorSource& ref) {
  std::string bad;
  for (const char* c : {"p7", "p64", "p300"}) {
    const std::string k = c;
    const auto toks = golden<int32_t>(ref, k + ".tokens");
    const int32_t primary = golden<int32_t>(ref, k + ".primary")[0];
    auto sc = consumed(cpu, toks);
    auto sg = consumed(g, toks);
    for (double t : {0.0, 0.6, 0.8, 1.0})
      for (int depth : {0, 1, 3, 5, 7}) {
        std::vector<int32_t> dc, dg;
        cpu.draft_head()->draft_gated(*sc, primary, depth, t, dc);
        g.draft_head()->draft_gated(*sg, primary, depth, t, dg);
        if (dc != dg && bad.empty())
          bad = k + " gate " + std::to_string(t) + " depth " + std::to_string(depth) + ": " + std::to_string(dg.size()) +
                " drafts vs the CPU's " + std::to_string(dc.size());
      }
  }
  check(bad.empty(), "gate 0 / 0.6 / 0.8 / 1.0 x depth 0 / 1 / 3 / 5 / 7: DraftHead::draft_gated = the CPU's drafts" +
                         (bad.empty() ? std::string() : ": " + bad));
}

void unchanged(dsv4::DeepseekV4CudaModel& g, const std::vector<int32_t>& toks) {
  const int32_t primary = 77, after = 500;
  auto s = consumed(g, toks), c = s->clone();
  std::vector<int32_t> d;
  g.draft(*s, primary, 5, d);
  g.draft(*s, primary + 1, 3, d);
  const auto ls = g.decode(*s, after), lc = g.decode(*c, after);
  const K5 a = gpu_k5(g, *s, primary), b = gpu_k5(g, *c, primary);
  check(s->position() == c->position() && ls == lc && same(a, b),
        "draft() leaves the state unchanged: next decode logits and the next K5 pass bit-identical to a clone that never "
        "drafted");
}

// One base state and a window: every keep (draft_test_util.h commit_every_keep).
void commit_case(dsv4::DeepseekV4CudaModel& g, int64_t len, const std::vector<int32_t>& window) {
  const int64_t n = int64_t(window.size());
  const std::string bad = commit_every_keep(g, len, window, [&](ModelState& t, ModelState& r, int32_t tok) {
    return same(gpu_k5(g, t, tok), gpu_k5(g, r, tok));
  });
  char buf[300];
  std::snprintf(buf, sizeof buf,
                "captured commit, prompt %lld, window %lld: every keep 1..%lld = decode steps over the kept tokens (next K5 pass, "
                "6 decode steps, next K5 pass again bit-identical)%s%s",
                (long long)len, (long long)n, (long long)n, bad.empty() ? "" : ": ", bad.c_str());
  check(bad.empty(), buf);
}

void commits(dsv4::DeepseekV4CudaModel& g, bool quick) {
  const int64_t V = g.info().vocab_size;
  const std::vector<int32_t> w4 = {17, 90, 3, 44}, w16 = synthetic_tokens(16, 29, 5, V);
  // the DSpark window is 16 rows: prompts below, at and past it (a kept prefix that fills it)
  const std::vector<int64_t> lens = quick ? std::vector<int64_t>{14, 30} : std::vector<int64_t>{3, 13, 14, 15, 16, 29, 30};
  for (int64_t len : lens) commit_case(g, len, w4);
  for (int64_t len : quick ? std::vector<int64_t>{13} : std::vector<int64_t>{1, 13, 30, 47}) commit_case(g, len, w16);
}

void speculative(Model& cpu, Model& gpu, const std::vector<int32_t>& prompt) {
  speculative_equals_ar(cpu, gpu, prompt, {1, 4}, "DSpark speculative");
}

// Item 9.
void tensor_core_prefill(dsv4::DeepseekV4CudaModel& exact, dsv4::DeepseekV4CudaModel& tc,
                         const std::vector<int32_t>& toks) {
  const int32_t primary = 77;
  const int64_t V = exact.info().vocab_size;
  auto se = consumed(exact, toks), st = consumed(tc, toks);
  const K5 a = gpu_k5(exact, *se, primary), b = gpu_k5(tc, *st, primary);
  size_t rows = 1;  // row r's input: the primary (r = 0) or draft r - 1
  while (rows < a.drafts.size() && a.drafts[rows - 1] == b.drafts[rows - 1]) ++rows;
  const size_t n = std::min(rows * size_t(V), std::min(a.logits.size(), b.logits.size()));
  head_within("DSpark K5 pass after a " + std::to_string(toks.size()) + "-row tensor-core prefill vs after the exact one (" +
                  std::to_string(rows) + " rows with equal inputs)",
              std::vector<float>(a.logits.begin(), a.logits.begin() + std::ptrdiff_t(n)),
              std::vector<float>(b.logits.begin(), b.logits.begin() + std::ptrdiff_t(n)), V,
              HeadBound{ds4_test::tc_criterion::kMean, ds4_test::tc_criterion::kMargin});
  tc_prefill_speculative(tc, toks, {1, 4}, "DSpark");
}

}  // namespace

int main(int argc, char** argv) {
  const TestArgs args = parse_args(argc, argv);
  const std::string& root = args.root;
  try {
    const std::string dir = dspark_dir(root);
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
    auto ref = open_tensor_source(root + "/tests/data/deepseek_v4/dspark/golden_dspark.safetensors");
    const int64_t V = gpu.info().vocab_size;
    const auto p64 = golden<int32_t>(*ref, "p64.tokens");
    heads_and_inputs(gpu);
    golden_cases(gpu, *ref, args.quick);
    std::vector<std::vector<int32_t>> prompts = {golden<int32_t>(*ref, "p7.tokens"), p64};
    if (!args.quick) prompts.push_back(synthetic_tokens(40, 41, 3, V));
    versus_cpu(*cpu, gpu, direct, prompts);
    gates(*cpu, gpu, *ref);
    unchanged(gpu, p64);
    commits(gpu, args.quick);
    {  // 301 % 4 = 1, 301 % 16 = 13: compressor windows open; draft() (ungated) keeps all 5 drafts
      checkpoint_round_trips(*cpu, gpu, synthetic_tokens(301, 41, 3, V),
                             CheckpointCase{"DSpark", 77, 5, kTol, "layer.3.comp.pend_kv", size_t(gpu.config().head_dim)});
    }
    if (!args.quick) speculative(*cpu, gpu, p64);
    {  // item 9: the default options (tensor-core prefill chunks)
      const std::string tdir = dspark_dir(root);
      auto tc_m = dsv4::load_cuda(tdir, o, dsv4::CudaModelOptions{});
      fs::remove_all(tdir);
      auto& tc = dynamic_cast<dsv4::DeepseekV4CudaModel&>(*tc_m);
      tensor_core_prefill(gpu, tc, synthetic_tokens(300, 41, 3, V));
    }
  } catch (const std::exception& e) {
    std::printf("FATAL %s\n", e.what());
    return 2;
  }
  return summary();
}
