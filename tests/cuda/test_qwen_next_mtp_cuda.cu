// The CUDA Qwen MTP draft head (src/models/qwen_next/cuda/mtp.cu) against the CPU model's
// head (forward.cpp mtp_draft) and the golden MTP rows. Plain executable (no GoogleTest on
// the H200 image); exits 1 when any check fails.
//  1. tests/data/qwen_next tiny model (F32, MTP head), right after a prefill of p7 / p64 /
//     p300: draft ids for depth 1..5 equal the CPU's, draft logits rows within kTol of the
//     CPU's (p300: kNearTieTol, the trunk test's MoE near-tie), depth 3 = golden mtp rows;
//     the same on a model without graphs and stacked projections: bit-identical.
//  2. The state is unchanged by a draft: the next trunk logits and the next draft equal a
//     clone's that never drafted, bit for bit.
//  3. Drafting after decode steps without drafts, after a multi-token forward (catch-up of
//     pending rows) and after 150 prompt tokens (more than the ring of 64: catch-up inside
//     forward) equals the CPU.
//  4. draft_picked with a pick of the 2nd-best id equals the CPU's draft_picked.
//  5. engine::generate_greedy on the CUDA model, verifying through verify_capture +
//     commit_prefix (chunk.cu): depth 3 (and depth 3 with a corrupted last draft, forcing
//     partial keeps) gives exactly the AR token ids, drafted > 0, repairs 0, full replays 0
//     (the corrupted pass: prefix commits > 0). models/default (bf16, trained head) the same
//     on tests/data/default_model/greedy.json's chat prompts, with its acceptance printed.
//  6. Chunked forwards keep the ring: after a 40- and a 150-token prefill (one exact prefill
//     chunk, the ring fed piece by piece after it, its room caught up before each piece) the drafts equal the CPU's, and bit for bit a
//     state that consumed the same tokens by decode steps.
//  7. Captured commit with the head on: verify_capture of 4 / 8 rows after 33 tokens (and of 8
//     after 60: a catch-up before the window) + commit_prefix(keep) for every keep, then a
//     draft: ids and logits bit-identical to a state that consumed only the kept tokens by
//     decode steps, ids = the CPU model's after its own verify_capture / commit_prefix (logits
//     within kTol); the next trunk step and the draft after it bit-identical too. Also a draft
//     on the uncommitted window (its catch-up consumes the window's rows; commit_prefix moves
//     the head back, mtp_keep_through) gives the same.
//  8. Checkpoints with the head on (cuda/state_io.cu: the ring unrolled into the CPU's
//     pending pairs and last_wide), after 40 prompt tokens (39 pending pairs) and after a
//     draft at 40 plus 3 decode steps (the head caught up, 3 pending): GPU -> fresh GPU state:
//     next trunk logits and the depth-3 draft (ids and logits) bit-identical; GPU -> CPU
//     model: trunk logits within kTol of the GPU and of the CPU's own state, drafts equal;
//     CPU -> GPU likewise. A CPU state with 149 pending pairs (more than the ring) is refused
//     with InputError and the refused state still drafts as before; after one CPU draft it
//     loads.
//  9. Tensor-core prefill with the head on (issue #22): a model with gemm_rows 64 (the server's
//     setting) consumes p300 in one 300-row tensor-core chunk, the ring fed piece by piece
//     after it (chunk.cu forward_chunk; the head's catch-up stays its exact decode-step code on
//     the chunk's rows). The depth-4 chain with the exact model's ids forced (mtp_draft's
//     logits {4, vocab}) vs the exact model's within the trunk's tensor-core bound
//     (qwen_next_tensor_cores.h: mean |diff| <= 2e-2, argmax equal where the margin > 0.6); the
//     prompt's logits with the head on = without, bit for bit; the speculative loop after that
//     prefill = greedy AR of that model (depths 1, 3).
// Usage: test_qwen_next_mtp_cuda [root] [--quick]   (--quick: p7/p64, the tiny model only,
//   item 6 at 40 tokens, item 7 at 4 rows)
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "engine/speculative.h"
#include "formats/tensor_source.h"
#include "models/qwen_next/cuda/model_cuda.h"
#include "models/qwen_next/model.h"
#include "draft_test_util.h"
#include "test_common.h"

using namespace ds4;
using namespace ds4::cuda_test;
using qwen_next::QwenNextCudaModel;
using qwen_next::QwenNextModel;

namespace {

constexpr float kTol = 1e-4f;         // tests/cuda/test_qwen_next_cuda.cu kTol (README golden rule)
constexpr float kNearTieTol = 1e-3f;  // its kNearTieTol: p300's MoE routing near-tie at row 276

struct Models {
  QwenNextModel* cpu;
  QwenNextCudaModel* gpu;
  QwenNextCudaModel* nograph;
};

template <class M>
std::unique_ptr<ModelState> prefilled(M& m, const std::vector<int32_t>& toks, std::vector<float>& logits) {
  auto s = m.new_state();
  m.draft_head()->enable_draft(*s);
  logits = m.prefill(*s, toks);
  return s;
}

std::string fmt(const char* f, double a, double b = 0, double c = 0) {
  char buf[256];
  std::snprintf(buf, sizeof buf, f, a, b, c);
  return buf;
}

// Depths 1..5 on one prefilled state pair: ids equal, logits within tol.
void depths(const Models& m, ModelState& sc, ModelState& sg, int32_t next, const std::string& what, float tol) {
  const int64_t V = m.gpu->info().vocab_size;
  for (int depth = 1; depth <= 5; ++depth) {
    std::vector<float> lc, lg;
    std::vector<int32_t> dc, dg;
    m.cpu->mtp_draft(sc, next, depth, lc, dc);
    m.gpu->mtp_draft(sg, next, depth, lg, dg);
    const float d = lc.size() == lg.size() ? max_diff(lg.data(), lc.data(), lc.size()) : INFINITY;
    check(dc == dg && d <= tol && lg.size() == size_t(depth * V),
          what + fmt(": depth %.0f draft ids = CPU, logits max |diff| vs CPU %.3g (tol %.0e)", depth, d, tol));
  }
}

void after_prefill(const Models& m, const TensorSource& g, const std::string& p) {
  const auto tokens = golden<int32_t>(g, p + ".tokens");
  const auto greedy = golden<int32_t>(g, p + ".greedy");
  const float tol = p == "p300" ? kNearTieTol : kTol;
  std::vector<float> lc, lg, ln;
  auto sc = prefilled(*m.cpu, tokens, lc);
  auto sg = prefilled(*m.gpu, tokens, lg);
  auto sn = prefilled(*m.nograph, tokens, ln);
  const int64_t V = m.gpu->info().vocab_size;
  check(argmax(lg.data(), V) == greedy[0], "tiny " + p + ": prefill argmax = golden greedy[0]");
  // Golden MTP rows: depth 3 after the prompt with next = greedy[0] (test_golden.cpp).
  std::vector<float> dl, nl;
  std::vector<int32_t> dd, nd;
  m.gpu->mtp_draft(*sg, greedy[0], 3, dl, dd);
  m.nograph->mtp_draft(*sn, greedy[0], 3, nl, nd);
  const auto ref = golden<float>(g, p + ".mtp_logits");
  const float dgold = dl.size() == ref.size() ? max_diff(dl.data(), ref.data(), ref.size()) : INFINITY;
  check(dd == golden<int32_t>(g, p + ".mtp_drafts") && dgold <= tol,
        "tiny " + p + fmt(": depth 3 drafts = golden, logits max |diff| vs golden %.3g (tol %.0e)", dgold, tol));
  const float dn = dl.size() == nl.size() ? max_diff(dl.data(), nl.data(), dl.size()) : INFINITY;
  check(dd == nd && dn == 0.f, "tiny " + p + fmt(": graphs + stacked vs direct + one gemv per matrix: %.3g (must be 0)", dn));
  depths(m, *sc, *sg, greedy[0], "tiny " + p, tol);
}

// A draft leaves the state as it was: trunk logits and the head's next draft as a clone's.
void unchanged(const Models& m, const TensorSource& g) {
  const auto tokens = golden<int32_t>(g, "p64.tokens");
  const auto greedy = golden<int32_t>(g, "p64.greedy");
  std::vector<float> l;
  auto s = prefilled(*m.gpu, tokens, l);
  auto c = s->clone();
  std::vector<int32_t> d;
  m.gpu->draft(*s, greedy[0], 5, d);
  std::vector<float> la, lb;
  m.gpu->forward(*s, std::span<const int32_t>(greedy.data(), 2), Logits::kAll, la);
  m.gpu->forward(*c, std::span<const int32_t>(greedy.data(), 2), Logits::kAll, lb);
  check(!la.empty() && la == lb, "tiny p64: trunk logits after a depth-5 draft = a clone's that never drafted (bit-identical)");
  std::vector<float> da, db;
  std::vector<int32_t> ia, ib;
  m.gpu->mtp_draft(*s, greedy[2], 4, da, ia);
  m.gpu->mtp_draft(*c, greedy[2], 4, db, ib);
  check(ia == ib && da == db, "tiny p64: the next draft after it = the clone's (bit-identical)");
}

// Drafts interleaved with decode steps and multi-token forwards, CPU and GPU in lockstep.
void catch_up(const Models& m, const TensorSource& g) {
  const auto tokens = golden<int32_t>(g, "p300.tokens");
  const auto greedy = golden<int32_t>(g, "p300.greedy");
  std::vector<float> lc, lg, tmp;
  // 150 prompt tokens: the ring (64 rows) overflows inside forward, twice.
  const std::vector<int32_t> head(tokens.begin(), tokens.begin() + 150);
  auto sc = prefilled(*m.cpu, head, lc);
  auto sg = prefilled(*m.gpu, head, lg);
  const float tol = kTol;
  depths(m, *sc, *sg, tokens[150], "tiny p300[:150] (catch-up inside forward)", tol);
  // Three decode steps without drafting, then a draft (3 pending rows + the ones above).
  for (int i = 150; i < 153; ++i) {
    lc = m.cpu->decode(*sc, tokens[size_t(i)]);
    lg = m.gpu->decode(*sg, tokens[size_t(i)]);
  }
  depths(m, *sc, *sg, tokens[153], "tiny p300[:153] after 3 decode steps", tol);
  // A 20-token forward (kNone) then a draft: 20 pending pairs.
  const std::span<const int32_t> chunk(tokens.data() + 153, 20);
  m.cpu->forward(*sc, chunk, Logits::kNone, tmp);
  m.gpu->forward(*sg, chunk, Logits::kNone, tmp);
  depths(m, *sc, *sg, tokens[173], "tiny p300[:173] after a 20-token forward", tol);
  (void)greedy;
}

// The 2nd-best id of a row (ties: lower id), the same rule on both sides.
int32_t second_best(std::span<const float> row) {
  const int32_t a = int32_t(std::max_element(row.begin(), row.end()) - row.begin());
  int32_t b = a == 0 ? 1 : 0;
  for (int32_t i = 0; i < int32_t(row.size()); ++i)
    if (i != a && row[size_t(i)] > row[size_t(b)]) b = i;
  return b;
}

void picked(const Models& m, const TensorSource& g) {
  const auto tokens = golden<int32_t>(g, "p64.tokens");
  const auto greedy = golden<int32_t>(g, "p64.greedy");
  std::vector<float> lc, lg;
  auto sc = prefilled(*m.cpu, tokens, lc);
  auto sg = prefilled(*m.gpu, tokens, lg);
  std::vector<int32_t> dc, dg, gg;
  m.cpu->draft_picked(*sc, greedy[0], 4, second_best, dc);
  const bool ok = m.gpu->draft_picked(*sg, greedy[0], 4, second_best, dg);
  check(ok && dc == dg && dg.size() == 4, "tiny p64: draft_picked (2nd-best id each step), depth 4 = CPU");
  m.gpu->draft(*sg, greedy[0], 4, gg);  // and the greedy chain after it is the plain one again
  std::vector<float> l2;
  std::vector<int32_t> ref;
  auto s2 = prefilled(*m.gpu, tokens, l2);
  m.gpu->draft(*s2, greedy[0], 4, ref);
  check(gg == ref, "tiny p64: a greedy draft after draft_picked = a fresh state's greedy draft");
}

// Item 6: drafts after a prefill of n tokens (chunks) = CPU, and = decode steps bit for bit.
void chunked(const Models& m, const TensorSource& g, int64_t n) {
  const auto tokens = golden<int32_t>(g, "p300.tokens");
  const std::vector<int32_t> head(tokens.begin(), tokens.begin() + n);
  std::vector<float> lc, lg, tmp;
  auto sc = prefilled(*m.cpu, head, lc);
  auto sg = prefilled(*m.gpu, head, lg);
  auto ss = m.gpu->new_state();
  m.gpu->enable_draft(*ss);
  for (int32_t t : head) m.gpu->forward(*ss, std::span<const int32_t>(&t, 1), Logits::kNone, tmp);
  const int32_t next = tokens[size_t(n)];
  const std::string what = "tiny p300[:" + std::to_string(n) + "] prefill in 16-row chunks";
  depths(m, *sc, *sg, next, what, kTol);
  std::vector<float> a, b;
  std::vector<int32_t> ia, ib;
  m.gpu->mtp_draft(*sg, next, 3, a, ia);
  m.gpu->mtp_draft(*ss, next, 3, b, ib);
  check(ia == ib && !a.empty() && a == b, what + ": depth 3 draft = a state fed by decode steps (bit-identical)");
}

// Item 7 for one window: `rows` verify rows after `prefix` tokens, every keep. early_draft:
// a draft runs on the uncommitted window first.
void captured(const Models& m, const TensorSource& g, int64_t prefix, int64_t rows, bool early_draft) {
  const auto tokens = golden<int32_t>(g, "p300.tokens");
  const std::vector<int32_t> head(tokens.begin(), tokens.begin() + prefix);
  const std::span<const int32_t> win(tokens.data() + prefix, size_t(rows));
  std::vector<float> l;
  auto bc = prefilled(*m.cpu, head, l);
  auto bg = prefilled(*m.gpu, head, l);
  int64_t bad = 0, first_bad = -1;
  float worst_cpu = 0.f;
  for (int64_t keep = 1; keep <= rows; ++keep) {
    const int32_t next = tokens[size_t(prefix + rows + keep)], after = tokens[size_t(prefix + rows + keep + 1)];
    auto tg = bg->clone(), rg = bg->clone();
    std::vector<float> lg, tmp;
    bool ok = m.gpu->verify_capture(*tg, win, lg) && int64_t(lg.size()) == rows * m.gpu->info().vocab_size;
    std::vector<int32_t> d;
    if (early_draft) m.gpu->draft(*tg, next, 3, d);
    m.gpu->commit_prefix(*tg, keep);
    for (int64_t i = 0; i < keep; ++i) m.gpu->forward(*rg, win.subspan(size_t(i), 1), Logits::kNone, tmp);
    ok = ok && tg->position() == rg->position();
    std::vector<float> dt, dr, dc;
    std::vector<int32_t> it, ir, ic;
    m.gpu->mtp_draft(*tg, next, 3, dt, it);
    m.gpu->mtp_draft(*rg, next, 3, dr, ir);
    ok = ok && it == ir && dt == dr;
    auto tc = bc->clone();
    std::vector<float> lc;
    ok = ok && m.cpu->verify_capture(*tc, win, lc);
    m.cpu->commit_prefix(*tc, keep);
    m.cpu->mtp_draft(*tc, next, 3, dc, ic);
    const float dcpu = dc.size() == dt.size() ? max_diff(dt.data(), dc.data(), dc.size()) : INFINITY;
    worst_cpu = std::max(worst_cpu, dcpu);
    ok = ok && ic == it && dcpu <= kTol;
    // The next trunk step (its row pushed after the commit) and the draft after it.
    const auto xt = m.gpu->decode(*tg, next), xr = m.gpu->decode(*rg, next);
    m.gpu->mtp_draft(*tg, after, 3, dt, it);
    m.gpu->mtp_draft(*rg, after, 3, dr, ir);
    ok = ok && !xt.empty() && xt == xr && it == ir && dt == dr;
    if (!ok) {
      ++bad;
      if (first_bad < 0) first_bad = keep;
    }
  }
  check(bad == 0, "tiny captured commit with the MTP head, " + std::to_string(rows) + " rows after " +
                      std::to_string(prefix) + " tokens" + (early_draft ? " (a draft on the uncommitted window)" : "") +
                      fmt(": keep 1..rows, %.0f commits differ (first keep %.0f; drafts vs decode steps bit-identical, "
                          "ids = CPU, logits max |diff| vs CPU %.3g)",
                          double(bad), double(first_bad), worst_cpu));
}

// Greedy speculative decoding through the engine's loop equals AR on the same CUDA model.
void speculative(Model& gpu, const std::vector<int32_t>& prompt, int64_t n, const std::string& what) {
  const auto& eos = gpu.info().eos_token_ids;
  std::vector<float> l;
  auto ar_state = gpu.new_state();
  l = gpu.prefill(*ar_state, prompt);
  const auto ar = engine::generate_greedy(gpu, ar_state, l, n, eos, 0);
  for (int pass = 0; pass < 2; ++pass) {
    auto st = gpu.new_state();
    gpu.draft_head()->enable_draft(*st);
    l = gpu.prefill(*st, prompt);
    engine::SpecStats stats;
    std::function<void(std::vector<int32_t>&)> corrupt;
    if (pass == 1)  // the last draft never matches: every cycle keeps a strict prefix (a repair)
      corrupt = [&](std::vector<int32_t>& d) { d.back() = (d.back() + 1) % int32_t(gpu.info().vocab_size); };
    const auto sp = engine::generate_greedy(gpu, st, l, n, eos, 3, &stats, corrupt);
    // Every verify is captured (4 rows <= capture_rows): partial keeps are prefix commits.
    check(sp == ar && stats.drafted > 0 && stats.full_replays == 0 && stats.repairs == 0 &&
              (pass == 0 || stats.prefix_commits > 0),
          what + (pass ? " (last draft corrupted)" : "") +
              fmt(": speculative depth 3 = AR token ids; drafted %.0f, acceptance %.3f, ", double(stats.drafted),
                  stats.acceptance()) +
              fmt("prefix commits %.0f, repairs %.0f (must be 0), full replays %.0f", double(stats.prefix_commits),
                  double(stats.repairs), double(stats.full_replays)) +
              " (AR " + std::to_string(ar.size()) + " tokens)");
  }
}

// Item 8 at one point of a conversation: sc / sg are the CPU and GPU states (head on) after
// the same tokens; `next` the token to draft from, `then` the two tokens consumed after it.
void checkpoint_at(const Models& m, ModelState& sc, ModelState& sg, int32_t next, std::span<const int32_t> then,
                   const std::string& what) {
  std::vector<StateSection> from_gpu, from_cpu;
  sg.save(from_gpu);
  sc.save(from_cpu);
  auto g2 = m.gpu->new_state(), c2 = m.cpu->new_state(), g3 = m.gpu->new_state();
  g2->load(from_gpu);  // fresh states without enable_draft: the sections turn the head on
  c2->load(from_gpu);
  g3->load(from_cpu);
  // Draft then trunk, on each of the five states.
  struct Run {
    std::vector<float> draft, trunk;
    std::vector<int32_t> ids;
  };
  auto run_gpu = [&](ModelState& s) {
    Run r;
    m.gpu->mtp_draft(s, next, 3, r.draft, r.ids);
    m.gpu->forward(s, then, Logits::kAll, r.trunk);
    return r;
  };
  auto run_cpu = [&](ModelState& s) {
    Run r;
    m.cpu->mtp_draft(s, next, 3, r.draft, r.ids);
    m.cpu->forward(s, then, Logits::kAll, r.trunk);
    return r;
  };
  const Run a = run_gpu(sg), b = run_gpu(*g2), c = run_cpu(*c2), d = run_cpu(sc), e = run_gpu(*g3);
  check(!a.trunk.empty() && a.trunk == b.trunk && a.ids == b.ids && a.draft == b.draft,
        what + ": checkpoint GPU -> GPU: depth-3 draft and next trunk rows bit-identical");
  auto diff = [](const std::vector<float>& x, const std::vector<float>& y) {
    return x.size() == y.size() && !x.empty() ? max_diff(x.data(), y.data(), x.size()) : INFINITY;
  };
  const float t1 = diff(c.trunk, a.trunk), t1c = diff(c.trunk, d.trunk), t2 = diff(e.trunk, d.trunk);
  const float q1 = diff(c.draft, a.draft), q2 = diff(e.draft, d.draft);
  check(c.ids == a.ids && c.ids == d.ids && t1 <= kTol && t1c <= kTol && q1 <= kTol,
        what + fmt(": checkpoint GPU -> CPU: drafts = GPU's = CPU's own, trunk max |diff| vs GPU %.3g, vs CPU %.3g, "
                   "draft logits vs GPU %.3g",
                   t1, t1c, q1));
  check(e.ids == d.ids && t2 <= kTol && q2 <= kTol,
        what + fmt(": checkpoint CPU -> GPU: drafts = CPU's, trunk max |diff| vs CPU %.3g, draft logits %.3g (tol 1e-4)",
                   t2, q2));
}

void checkpoints(const Models& m, const TensorSource& g) {
  const auto tokens = golden<int32_t>(g, "p300.tokens");
  std::vector<float> lc, lg;
  const std::vector<int32_t> head(tokens.begin(), tokens.begin() + 40);
  {
    auto sc = prefilled(*m.cpu, head, lc);
    auto sg = prefilled(*m.gpu, head, lg);
    checkpoint_at(m, *sc, *sg, tokens[40], std::span<const int32_t>(tokens.data() + 40, 2),
                  "tiny p300[:40] (39 pending pairs)");
  }
  {
    auto sc = prefilled(*m.cpu, head, lc);
    auto sg = prefilled(*m.gpu, head, lg);
    std::vector<int32_t> d;
    m.cpu->draft(*sc, tokens[40], 2, d);  // the head catches up to 39 pairs
    m.gpu->draft(*sg, tokens[40], 2, d);
    for (int i = 40; i < 43; ++i) {
      m.cpu->decode(*sc, tokens[size_t(i)]);
      m.gpu->decode(*sg, tokens[size_t(i)]);
    }
    checkpoint_at(m, *sc, *sg, tokens[43], std::span<const int32_t>(tokens.data() + 43, 2),
                  "tiny p300[:43] (head caught up to 39, 3 pending)");
  }
  // More pending pairs than the device ring keeps: refused before anything is written.
  const std::vector<int32_t> long_head(tokens.begin(), tokens.begin() + 150);
  auto sc = prefilled(*m.cpu, long_head, lc);
  std::vector<StateSection> sections;
  sc->save(sections);
  auto sg = prefilled(*m.gpu, head, lg);  // a live GPU state the refused load must not touch
  auto ref = sg->clone();
  bool threw = false;
  try {
    sg->load(sections);
  } catch (const InputError& ex) {
    threw = true;
    std::printf("     (%s)\n", ex.what());
  }
  std::vector<float> a, b;
  std::vector<int32_t> ia, ib;
  m.gpu->mtp_draft(*sg, tokens[40], 3, a, ia);
  m.gpu->mtp_draft(*ref, tokens[40], 3, b, ib);
  check(threw && sg->position() == 40 && ia == ib && !a.empty() && a == b,
        "checkpoint: a CPU state with 149 pending MTP pairs is refused (InputError); the state drafts as before");
  std::vector<int32_t> d;
  m.cpu->draft(*sc, tokens[150], 1, d);  // catches the CPU head up: no pending pair left
  sections.clear();
  sc->save(sections);
  auto g2 = m.gpu->new_state();
  g2->load(sections);
  std::vector<float> dc, dg;
  std::vector<int32_t> ic, ig;
  m.cpu->mtp_draft(*sc, tokens[150], 3, dc, ic);
  m.gpu->mtp_draft(*g2, tokens[150], 3, dg, ig);
  const float q = dc.size() == dg.size() ? max_diff(dc.data(), dg.data(), dc.size()) : INFINITY;
  check(g2->position() == 150 && ic == ig && q <= kTol,
        fmt("checkpoint: after one CPU draft the 150-token state loads on the GPU; drafts = CPU's (logits %.3g)", q));
}

// Item 9.
void tensor_core_prefill(QwenNextCudaModel& exact, QwenNextCudaModel& tc, const std::vector<int32_t>& toks) {
  const int32_t next = 5;
  constexpr int kDepth = 4;
  const int64_t V = exact.info().vocab_size;
  std::vector<float> lg, le, lt;
  auto se = prefilled(exact, toks, lg), st = prefilled(tc, toks, lg);
  std::vector<int32_t> want, de, dt, own;
  exact.draft(*se, next, kDepth, want);
  exact.mtp_draft(*se, next, kDepth, le, de, forced_pick(want));
  tc.mtp_draft(*st, next, kDepth, lt, dt, forced_pick(want));
  head_within("MTP head after a " + std::to_string(toks.size()) +
                  "-row tensor-core prefill vs after the exact one (chain of 4, exact ids forced)",
              le, lt, V, HeadBound{2e-2f, 0.6f});
  tc.draft(*st, next, kDepth, own);
  std::printf("     MTP head after the tensor-core prefill: greedy draft ids %s the exact model's\n",
              own == want ? "equal" : "differ from");
  tc_prefill_speculative(tc, toks, {1, 3}, "Qwen MTP head");
}

}  // namespace

int main(int argc, char** argv) {
  const TestArgs args = parse_args(argc, argv);
  try {
    const std::string tiny = args.root + "/tests/data/qwen_next/model";
    LoadOptions o;
    auto cpu = qwen_next::load(tiny, o);
    auto gpu = qwen_next::load_cuda(tiny, o);
    auto nograph = qwen_next::load_cuda(tiny, o, qwen_next::CudaModelOptions{false, false});
    Models m{dynamic_cast<QwenNextModel*>(cpu.get()), dynamic_cast<QwenNextCudaModel*>(gpu.get()),
             dynamic_cast<QwenNextCudaModel*>(nograph.get())};
    check(m.cpu && m.gpu && m.nograph, "loaders return the CPU and CUDA Qwen models");
    if (!m.cpu || !m.gpu || !m.nograph) return summary();
    check(gpu->info().has_draft_head && gpu->draft_head() == m.gpu,
          "tiny: the CUDA model has the MTP draft head (info.has_draft_head, draft_head())");
    auto g = open_tensor_source(args.root + "/tests/data/qwen_next/golden.safetensors");
    const std::vector<std::string> prompts =
        args.quick ? std::vector<std::string>{"p7", "p64"} : std::vector<std::string>{"p7", "p64", "p300"};
    for (const auto& p : prompts) after_prefill(m, *g, p);
    unchanged(m, *g);
    catch_up(m, *g);
    picked(m, *g);
    chunked(m, *g, 40);
    if (!args.quick) chunked(m, *g, 150);
    captured(m, *g, 33, 4, false);
    if (!args.quick) {
      captured(m, *g, 33, 8, false);
      captured(m, *g, 60, 8, false);  // 60 + 8 - 1 >= 64 pending: forward_chunk catches up first
      captured(m, *g, 33, 4, true);
    }
    checkpoints(m, *g);
    speculative(*gpu, golden<int32_t>(*g, "p64.tokens"), 48, "tiny p64");
    {  // item 9: prefill chunks on tensor cores (the server's setting)
      qwen_next::CudaModelOptions t;
      t.gemm_rows = 64;
      qwen_next::QwenNextCudaModel tc(open_tensor_source(tiny), o, t);
      tensor_core_prefill(*m.gpu, tc, golden<int32_t>(*g, "p300.tokens"));
    }
    bool threw = false;
    try {
      auto s = gpu->new_state();
      std::vector<int32_t> d;
      m.gpu->draft(*s, 1, 3, d);
    } catch (const InputError&) {
      threw = true;
    }
    check(threw, "tiny: draft without enable_draft + prefill throws InputError");
    if (!args.quick) {
      const std::string dir = args.root + "/models/default";
      auto dgpu = qwen_next::load_cuda(dir, o);
      check(dgpu->draft_head() != nullptr, "default (bf16): the CUDA model has the MTP draft head");
      std::ifstream f(args.root + "/tests/data/default_model/greedy.json");
      const auto j = nlohmann::json::parse(f);
      if (dgpu->draft_head())
        for (const auto& cs : j["cases"])  // chat prompts: the trained head's home ground
          speculative(*dgpu, cs["prompt"].get<std::vector<int32_t>>(), 64, "default " + cs["name"].get<std::string>());
    }
  } catch (const std::exception& e) {
    std::printf("FATAL %s\n", e.what());
    return 2;
  }
  return summary();
}
