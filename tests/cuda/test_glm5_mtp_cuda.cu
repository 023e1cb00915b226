// Speculative decoding of the CUDA GLM 5.x model (issue #11): the integrated MTP draft head
// on the GPU (src/models/glm5/cuda/mtp.cu) and the captured-prefix commit on the device
// (spec_commit.cu), against the CPU model (mtp.cpp, spec_commit.cpp) and the torch reference
// vectors of tests/data/glm5/mtp (tiny trunk + mtp.safetensors: an MLA + full-indexer head
// layer with MoE). Plain executable; exits 1 when any check fails.
//  1. Per prompt p1/p7/p64/p300 (p300 overflows the device queue during the prefill, so the
//     head catches up early): the greedy chain's ids at depth 1..4 = the CPU's = the golden
//     drafts; the logits of the picked chain (pick = argmax) within kTol of the golden rows
//     and of the CPU's; greedy ids = picked ids; drafting twice in a row gives the same ids.
//  2. No trace: after a draft the next trunk logits are bit-identical to a clone that never
//     drafted, and both then draft the same ids.
//  3. Drafting after decode steps, a chunked prefill and a multi-row forward, CPU vs GPU.
//  4. draft_picked with the 2nd-best token picked at every step: ids = CPU's, logits within kTol.
//  5. verify_capture + commit_prefix(keep), windows of 4 and 2 rows, prompt lengths 9..12
//     (index_kpool 4: a pool completes at every row of the window), every keep: the verify
//     rows and the next decode logits bit-identical to a state that consumed only the kept
//     tokens by single decode steps; the following draft's ids equal, its logits within
//     kTol (printed; expected bit-identical).
//  6. Checkpoints with the head's history: GPU -> GPU, GPU -> CPU, CPU -> GPU draft equal ids.
//  7. engine::generate_greedy (speculative loop) on the CUDA model, depths 1 and 3: the greedy
//     AR tokens exactly, drafted > 0, repairs and full replays 0; with drafts forced to the AR
//     continuation: accepted > 0 and bonus > 0 too.
//  8. chunk_rows 1 (the head's catch-up in 1-row pieces): drafts = golden; a 2-row
//     verify_capture returns false (the loop then repairs); first, on that fresh model, a CPU
//     checkpoint with the head on drafts the golden ids (the head's table made on first use).
//  9. Tensor-core prefill with the head on (issue #22): a model with prefill chunks on tensor
//     cores (prefill_rows 512, gemm_rows 64, the server's setting) consumes p300 in one 300-row
//     chunk; the head runs the chunk's 299 pairs as one multi-row pass on tensor cores
//     (mtp.cu mtp_chunk_pairs). The head's chain with the exact model's ids forced (draft_picked,
//     logits {4, vocab}) vs the exact model's within the trunk's tensor-core bound
//     (test_glm5_cuda item 8: mean |diff| <= 1e-2, argmax equal where the margin > 4e-2); the
//     prompt's logits with the head on = without, bit for bit; the speculative loop after that
//     prefill = greedy AR of that model (depths 1, 3).
// Usage: test_glm5_mtp_cuda [root]
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "core/error.h"
#include "engine/speculative.h"
#include "formats/tensor_source.h"
#include "models/glm5/cuda/model_cuda.h"
#include "models/glm5/model.h"
#include "draft_test_util.h"
#include "test_common.h"
// tests/unit/common: the gtest-free draft-head scaffolding shared with the unit tests.
#include "../unit/common/draft_head_run.h"

using namespace ds4;
using namespace ds4::cuda_test;

namespace {

constexpr float kTol = 1e-3f;  // tests/data/glm5/mtp/README.md (and the trunk's CPU bound)
constexpr int kDepth = 4;

// The trunk's files and the head file side by side (the head ships as its own file).
std::string assemble(const std::string& root) {
  return draft_test::trunk_with_head_dir("glm5_mtp_cuda", root + "/tests/data/glm5/model",
                                         root + "/tests/data/glm5/mtp/mtp.safetensors");
}

struct Models {
  Model& cpu;
  glm5::Glm5CudaModel& gpu;
  int64_t V;
};

std::unique_ptr<ModelState> prefilled(Model& m, std::span<const int32_t> toks, size_t chunk = 0) {
  auto st = m.new_state();
  m.draft_head()->enable_draft(*st);
  std::vector<float> lg;
  if (!chunk) chunk = toks.size();
  for (size_t i = 0; i < toks.size(); i += chunk)
    m.forward(*st, toks.subspan(i, std::min(chunk, toks.size() - i)), Logits::kNone, lg);
  return st;
}

// The GPU's picked chain with pick = argmax (CPU sample_argmax order: the first largest).
std::vector<int32_t> gpu_draft_logits(glm5::Glm5CudaModel& gpu, ModelState& st, int32_t next, int depth,
                                      std::vector<float>& logits) {
  std::vector<int32_t> d;
  const int64_t V = gpu.info().vocab_size;
  gpu.draft_picked(st, next, depth, [V](std::span<const float> r) { return argmax(r.data(), V); }, d);
  logits = gpu.last_draft_logits();
  return d;
}

std::string ids(const std::vector<int32_t>& v) {
  std::string s;
  for (int32_t t : v) {
    if (!s.empty()) s += ',';
    s += std::to_string(t);
  }
  return s;
}

void golden_drafts(const Models& m, const TensorSource& g, const std::string& p) {
  const auto tokens = golden<int32_t>(g, p + ".tokens");
  const int32_t next = golden<int32_t>(g, p + ".next_token")[0];
  const auto ref_ids = golden<int32_t>(g, p + ".drafts");
  const auto ref_lg = golden<float>(g, p + ".draft_logits");
  auto sc = prefilled(m.cpu, tokens);
  auto sg = prefilled(m.gpu, tokens);
  std::vector<float> lc, lg;
  std::vector<int32_t> dc;
  glm5::mtp_draft_logits(m.cpu, *sc, next, kDepth, lc, dc);
  bool depth_ok = true;
  for (int d = 1; d <= kDepth; ++d) {  // the greedy graph path, each depth on its own clone
    auto c = sg->clone();
    std::vector<int32_t> dg;
    m.gpu.draft(*c, next, d, dg);
    depth_ok = depth_ok && dg == std::vector<int32_t>(dc.begin(), dc.begin() + d);
  }
  auto twice = sg->clone();
  std::vector<int32_t> a, b;
  m.gpu.draft(*twice, next, kDepth, a);
  m.gpu.draft(*twice, next, kDepth, b);
  const auto dp = gpu_draft_logits(m.gpu, *sg, next, kDepth, lg);
  const size_t n = size_t(kDepth * m.V);
  const float vs_gold = lg.size() == n ? max_diff(lg.data(), ref_lg.data(), n) : INFINITY;
  const float vs_cpu = lg.size() == n ? max_diff(lg.data(), lc.data(), n) : INFINITY;
  check(depth_ok && dc == ref_ids && dp == dc,
        "mtp " + p + ": greedy draft ids depth 1..4 = CPU = golden (" + ids(dc) + "), picked-argmax = greedy");
  check(a == dc && b == dc, "mtp " + p + ": drafting twice on one state gives the same ids");
  char buf[200];
  std::snprintf(buf, sizeof buf, "mtp %s: draft logits max |diff| vs golden %.3g, vs CPU %.3g (tol %.0e)", p.c_str(),
                vs_gold, vs_cpu, double(kTol));
  check(vs_gold <= kTol && vs_cpu <= kTol, buf);
}

void no_trace(const Models& m, const TensorSource& g) {
  const auto tokens = golden<int32_t>(g, "p64.tokens");
  const int32_t next = golden<int32_t>(g, "p64.next_token")[0];
  auto s = prefilled(m.gpu, tokens);
  auto c = s->clone();
  std::vector<int32_t> d, dc;
  m.gpu.draft(*s, next, 3, d);
  const auto a = m.gpu.decode(*s, next), b = m.gpu.decode(*c, next);
  check(a == b && s->position() == c->position(), "mtp: trunk logits after a draft bit-identical to a clone that never drafted");
  m.gpu.draft(*s, 7, 3, d);
  m.gpu.draft(*c, 7, 3, dc);
  check(d == dc, "mtp: the drafted and the undrafted state then draft the same ids (" + ids(d) + ")");
}

// The same sequence of forwards and drafts on CPU and GPU: ids equal, logits within kTol.
void mixed(const Models& m, const TensorSource& g) {
  const auto tokens = golden<int32_t>(g, "p300.tokens");
  std::span<const int32_t> all(tokens);
  auto sc = prefilled(m.cpu, all.first(40), 16);
  auto sg = prefilled(m.gpu, all.first(40), 16);
  float worst = 0;
  bool same = true;
  auto both_draft = [&](int32_t next) {
    std::vector<float> lc, lg;
    std::vector<int32_t> dc;
    glm5::mtp_draft_logits(m.cpu, *sc, next, 3, lc, dc);
    auto c = sg->clone();
    std::vector<int32_t> dg;
    m.gpu.draft(*c, next, 3, dg);
    const auto dp = gpu_draft_logits(m.gpu, *sg, next, 3, lg);
    same = same && dg == dc && dp == dc;
    worst = std::max(worst, lg.size() == lc.size() ? max_diff(lg.data(), lc.data(), lc.size()) : INFINITY);
  };
  both_draft(tokens[40]);
  for (int i = 40; i < 43; ++i) m.cpu.decode(*sc, tokens[size_t(i)]), m.gpu.decode(*sg, tokens[size_t(i)]);
  both_draft(tokens[43]);
  std::vector<float> unused;
  m.cpu.forward(*sc, all.subspan(43, 5), Logits::kLast, unused);
  m.gpu.forward(*sg, all.subspan(43, 5), Logits::kLast, unused);
  both_draft(tokens[48]);
  m.cpu.forward(*sc, all.subspan(48, 100), Logits::kNone, unused);  // the queue overflows: early catch-up
  m.gpu.forward(*sg, all.subspan(48, 100), Logits::kNone, unused);
  both_draft(tokens[148]);
  char buf[200];
  std::snprintf(buf, sizeof buf,
                "mtp: drafts after a chunked prefill, decode steps, a 5-row and a 100-row forward: ids = CPU, "
                "max |logit diff| %.3g (tol %.0e)", worst, double(kTol));
  check(same && worst <= kTol, buf);
}

void picked_second(const Models& m, const TensorSource& g) {
  const auto tokens = golden<int32_t>(g, "p64.tokens");
  const int32_t next = golden<int32_t>(g, "p64.next_token")[0];
  auto second = [](std::span<const float> r) {
    const int32_t best = int32_t(std::max_element(r.begin(), r.end()) - r.begin());
    int32_t s = best == 0 ? 1 : 0;
    for (int32_t i = 0; i < int32_t(r.size()); ++i)
      if (i != best && r[size_t(i)] > r[size_t(s)]) s = i;
    return s;
  };
  auto sc = prefilled(m.cpu, tokens);
  auto sg = prefilled(m.gpu, tokens);
  std::vector<int32_t> dc, dg;
  m.cpu.draft_head()->draft_picked(*sc, next, kDepth, second, dc);
  m.gpu.draft_picked(*sg, next, kDepth, second, dg);
  // The CPU rows of the same chain: a second picked run records each row it is handed.
  std::vector<float> rows;
  auto sc2 = prefilled(m.cpu, tokens);
  std::vector<int32_t> dc2;
  m.cpu.draft_head()->draft_picked(*sc2, next, kDepth, [&](std::span<const float> r) {
    rows.insert(rows.end(), r.begin(), r.end());
    return second(r);
  }, dc2);
  const auto& lg = m.gpu.last_draft_logits();
  const float d = lg.size() == rows.size() ? max_diff(lg.data(), rows.data(), rows.size()) : INFINITY;
  char buf[200];
  std::snprintf(buf, sizeof buf, "mtp: draft_picked (2nd best each step) ids = CPU (%s), logits max |diff| %.3g", ids(dg).c_str(),
                d);
  check(dg == dc && dc2 == dc && d <= kTol, buf);
}

// Section 5: one window at one prompt length, every keep.
bool commit_case(const Models& m, int64_t len, const std::vector<int32_t>& window, std::string& why) {
  std::vector<int32_t> prompt;
  for (int64_t i = 0; i < len; ++i) prompt.push_back(int32_t((37 * i + 11) % 1000));
  auto base = prefilled(m.gpu, prompt);
  std::vector<int32_t> d;
  m.gpu.draft(*base, 5, 2, d);  // caught up, as at the start of a cycle
  const int64_t n = int64_t(window.size()), V = m.V;
  for (int64_t keep = 1; keep <= n; ++keep) {
    auto t = base->clone(), r = base->clone();
    std::vector<float> rows;
    if (!m.gpu.verify_capture(*t, window, rows)) return why = "verify_capture returned false", false;
    m.gpu.commit_prefix(*t, keep);
    bool rows_ok = true;
    for (int64_t k = 0; k < keep; ++k) {
      const auto lr = m.gpu.decode(*r, window[size_t(k)]);
      rows_ok = rows_ok && std::equal(lr.begin(), lr.end(), rows.begin() + k * V);
    }
    if (!rows_ok) return why = "verify row != decode step (keep " + std::to_string(keep) + ")", false;
    if (t->position() != r->position()) return why = "position after keep " + std::to_string(keep), false;
    const auto a = m.gpu.decode(*t, 99), b = m.gpu.decode(*r, 99);
    if (a != b) return why = "next decode logits differ after keep " + std::to_string(keep), false;
    std::vector<float> la, lb;
    const auto da = gpu_draft_logits(m.gpu, *t, 123, 3, la);
    const auto db = gpu_draft_logits(m.gpu, *r, 123, 3, lb);
    if (da != db) return why = "draft after keep " + std::to_string(keep) + ": " + ids(da) + " vs " + ids(db), false;
    const float dd = max_diff(la.data(), lb.data(), la.size());
    if (dd > kTol) return why = "draft logits after keep " + std::to_string(keep), false;
    if (dd != 0.f) std::printf("     (len %lld keep %lld: draft logits differ by %.3g, not bit-identical)\n",
                               (long long)len, (long long)keep, double(dd));
  }
  return true;
}

void commits(const Models& m) {
  for (const std::vector<int32_t>& w : {std::vector<int32_t>{17, 902, 3, 440}, std::vector<int32_t>{17, 902}}) {
    bool ok = true;
    std::string why;
    for (int64_t len = 9; len < 13 && ok; ++len) {
      ok = commit_case(m, len, w, why);
      if (!ok) why = "prompt " + std::to_string(len) + ": " + why;
    }
    check(ok, "commit: verify_capture + commit_prefix(keep) of a " + std::to_string(w.size()) +
                  "-row window = the kept tokens by decode steps, every keep, prompts 9..12 (next logits "
                  "bit-identical, next draft equal)" + (ok ? "" : " -- " + why));
  }
}

// Checkpoints carry the head's history: GPU -> GPU, GPU -> CPU and CPU -> GPU states draft
// the ids the source state drafts.
void checkpoints(const Models& m, const TensorSource& g) {
  const auto tokens = golden<int32_t>(g, "p64.tokens");
  auto sg = prefilled(m.gpu, tokens);
  auto sc = prefilled(m.cpu, tokens);
  std::vector<int32_t> d;
  m.gpu.draft(*sg, 3, 2, d);  // caught up, then one decode queues a pair
  m.cpu.draft_head()->draft(*sc, 3, 2, d);
  m.gpu.decode(*sg, 3), m.cpu.decode(*sc, 3);
  std::vector<StateSection> from_gpu, from_cpu;
  sg->save(from_gpu);
  sc->save(from_cpu);
  auto g2 = m.gpu.new_state(), c2 = m.cpu.new_state(), g3 = m.gpu.new_state();
  g2->load(from_gpu);
  c2->load(from_gpu);
  g3->load(from_cpu);
  std::vector<int32_t> ref, a, b, c;
  m.gpu.draft(*sg, 44, 3, ref);
  m.gpu.draft(*g2, 44, 3, a);
  m.cpu.draft_head()->draft(*c2, 44, 3, b);
  m.gpu.draft(*g3, 44, 3, c);
  check(a == ref && b == ref && c == ref, "checkpoint with the MTP head: GPU->GPU, GPU->CPU, CPU->GPU draft the same ids (" +
                                              ids(ref) + ")");
}

using Run = draft_test::SpecRun;
// 24 greedy tokens after `prompt` (depth 0: plain AR), eos 1023; `force`: drafts overwritten
// by the AR continuation.
Run generate(Model& m, const std::vector<int32_t>& prompt, int depth, const std::vector<int32_t>* force) {
  return draft_test::generate(m, prompt, depth, force, 1023);
}

void speculative(const Models& m, const TensorSource& g) {
  const auto prompt = golden<int32_t>(g, "p64.tokens");
  const Run ar = generate(m.gpu, prompt, 0, nullptr);
  for (int depth : {1, 3}) {
    const Run own = generate(m.gpu, prompt, depth, nullptr);
    const Run forced = generate(m.gpu, prompt, depth, &ar.tokens);
    char buf[300];
    std::snprintf(buf, sizeof buf,
                  "spec depth %d: greedy speculative = AR (%zu tokens); own drafts: drafted %lld accepted %lld prefix "
                  "commits %lld repairs %lld full replays %lld",
                  depth, ar.tokens.size(), (long long)own.stats.drafted, (long long)own.stats.accepted,
                  (long long)own.stats.prefix_commits, (long long)own.stats.repairs, (long long)own.stats.full_replays);
    check(own.tokens == ar.tokens && own.stats.drafted > 0 && own.stats.repairs + own.stats.full_replays == 0, buf);
    std::snprintf(buf, sizeof buf, "spec depth %d forced drafts: = AR, accepted %lld bonus %lld repairs %lld", depth,
                  (long long)forced.stats.accepted, (long long)forced.stats.bonus, (long long)forced.stats.repairs);
    check(forced.tokens == ar.tokens && forced.stats.accepted > 0 && forced.stats.bonus > 0 &&
              forced.stats.repairs + forced.stats.full_replays == 0, buf);
  }
}

// Item 9.
void tensor_core_prefill(const Models& m, glm5::Glm5CudaModel& tc, const TensorSource& g) {
  const auto tokens = golden<int32_t>(g, "p300.tokens");
  const int32_t next = golden<int32_t>(g, "p300.next_token")[0];
  auto se = prefilled(m.gpu, tokens), st = prefilled(tc, tokens);
  std::vector<int32_t> want, de, dt;
  m.gpu.draft(*se->clone(), next, kDepth, want);
  m.gpu.draft_picked(*se, next, kDepth, cuda_test::forced_pick(want), de);
  const std::vector<float> le = m.gpu.last_draft_logits();
  tc.draft_picked(*st, next, kDepth, cuda_test::forced_pick(want), dt);
  const std::vector<float> lt = tc.last_draft_logits();
  head_within("MTP head after a 300-row tensor-core prefill vs after the exact one (chain of 4, exact ids forced)", le,
              lt, m.V, HeadBound{1e-2f, 4e-2f});
  std::vector<int32_t> own;
  tc.draft(*st, next, kDepth, own);
  std::printf("     MTP head after the tensor-core prefill: greedy draft ids %s the exact model's (%s)\n",
              own == want ? "equal" : "differ from", ids(own).c_str());
  tc_prefill_speculative(tc, std::vector<int32_t>(tokens.begin(), tokens.end()), {1, 3}, "GLM MTP head", 1023);
}

}  // namespace

int main(int argc, char** argv) {
  const TestArgs args = parse_args(argc, argv);
  try {
    const std::string dir = assemble(args.root);
    LoadOptions o;
    o.threads = 4;
    auto cpu = glm5::load(dir, o);
    auto gpu = glm5::load_cuda(dir, o);
    auto* g5 = dynamic_cast<glm5::Glm5CudaModel*>(gpu.get());
    check(g5 && gpu->info().has_draft_head && gpu->draft_head() == g5, "CUDA model with mtp.safetensors has a draft head");
    if (!g5 || !gpu->draft_head()) return std::filesystem::remove_all(dir), summary();
    auto g = open_tensor_source(args.root + "/tests/data/glm5/mtp/golden_mtp.safetensors");
    const Models m{*cpu, *g5, gpu->info().vocab_size};
    for (const char* p : {"p1", "p7", "p64", "p300"}) golden_drafts(m, *g, p);
    no_trace(m, *g);
    mixed(m, *g);
    picked_second(m, *g);
    commits(m);
    checkpoints(m, *g);
    speculative(m, *g);
    {  // chunk_rows 1: the head catches up in 1-row pieces; a multi-row verify cannot capture
      auto one = glm5::load_cuda(dir, o, glm5::CudaModelOptions{true, true, 1});
      auto* g1 = dynamic_cast<glm5::Glm5CudaModel*>(one.get());
      const auto tokens = golden<int32_t>(*g, "p64.tokens");
      const int32_t next = golden<int32_t>(*g, "p64.next_token")[0];
      {  // a state loaded with the head on, on a model where no state enabled it yet
        auto sc = prefilled(*cpu, tokens);
        std::vector<int32_t> dc, d0;
        cpu->draft_head()->draft(*sc, next, 1, dc);  // caught up: the 16-row device queue takes it
        std::vector<StateSection> secs;
        sc->save(secs);
        auto s0 = g1->new_state();
        s0->load(secs);
        g1->draft(*s0, next, kDepth, d0);
        check(d0 == golden<int32_t>(*g, "p64.drafts"),
              "CPU checkpoint loaded on a fresh CUDA model (no enable_draft there yet) drafts the golden ids (" +
                  ids(d0) + ")");
      }
      auto s1 = prefilled(*g1, tokens);
      std::vector<int32_t> d1;
      g1->draft(*s1, next, kDepth, d1);
      std::vector<float> rows;
      const bool captured = g1->verify_capture(*s1, std::vector<int32_t>{next, d1[0]}, rows);
      check(d1 == golden<int32_t>(*g, "p64.drafts") && !captured,
            "chunk_rows 1: drafts = golden (" + ids(d1) + "), a 2-row verify_capture returns false");
    }
    {  // item 9: prefill chunks on tensor cores (the server's setting)
      glm5::CudaModelOptions t;
      t.prefill_rows = 512;
      t.gemm_rows = 64;
      auto tc = glm5::load_cuda(dir, o, t);
      tensor_core_prefill(m, dynamic_cast<glm5::Glm5CudaModel&>(*tc), *g);
    }
    // Without the head file: no draft head, enable_draft refused.
    auto plain = glm5::load_cuda(args.root + "/tests/data/glm5/model", o);
    check(!plain->info().has_draft_head && plain->draft_head() == nullptr, "CUDA model without the head file: no draft head");
    std::filesystem::remove_all(dir);
  } catch (const std::exception& e) {
    std::printf("FAIL exception: %s\n", e.what());
    ++g_fail;
  }
  return summary();
}
