// bench_speculative MODEL_DIR [max_tokens=200] [depth=3] [threads=0]
// Greedy AR vs greedy speculative decoding on the same chat prompts, same process: tok/s
// of each, acceptance, draft/verify/commit time, and the verify(D+1)/decode cost ratio.
#include <chrono>
#include <cstdio>
#include <string>

#include "engine/speculative.h"
#include "models/model.h"

using namespace ds4;
using Clock = std::chrono::steady_clock;
static double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

int main(int argc, char** argv) {
  if (argc < 2) { std::fprintf(stderr, "usage: bench_speculative MODEL_DIR [max_tokens] [depth] [threads]\n"); return 2; }
  const int64_t max_tokens = argc > 2 ? std::stoll(argv[2]) : 200;
  const int depth = argc > 3 ? std::stoi(argv[3]) : 3;
  LoadOptions opt;
  opt.threads = argc > 4 ? std::stoi(argv[4]) : 0;
  auto m = load_model(argv[1], opt);
  const auto& eos = m->info().eos_token_ids;
  // Chat prompts in models/default's tokenizer (ChatML user turn + assistant header).
  const std::vector<std::vector<int32_t>> prompts = {
      {8167, 345, 198, 1620, 358, 257, 611, 6189, 786, 257, 1938, 632, 3775, 82, 323, 5689, 13, 8168, 198, 8167, 360, 198},
      {8167, 345, 198, 1008, 1367, 3854, 526, 870, 8081, 585, 298, 867, 4483, 13, 8168, 198, 8167, 360, 198},
      {8167, 345, 198, 925, 257, 708, 372, 786, 275, 3283, 434, 3722, 13, 8168, 198, 8167, 360, 198},
      {8167, 345, 198, 450, 416, 2115, 285, 3769, 361, 3461, 257, 803, 678, 30, 8168, 198, 8167, 360, 198},
      {8167, 345, 198, 35, 1717, 593, 68, 1031, 4380, 466, 2035, 331, 396, 88, 467, 1082, 410, 13, 8168, 198, 8167, 360, 198},
      {8167, 345, 198, 3152, 470, 367, 1199, 257, 6149, 295, 7308, 30, 8168, 198, 8167, 360, 198},
  };
  double ar_s = 0, sp_s = 0;
  int64_t ar_n = 0, sp_n = 0;
  engine::SpecStats st;
  for (const auto& p : prompts) {
    auto s0 = m->new_state();
    auto l0 = m->prefill(*s0, p);
    auto t0 = Clock::now();
    auto ar = engine::generate_greedy(*m, s0, l0, max_tokens, eos, 0);
    ar_s += since(t0);
    ar_n += int64_t(ar.size());
    auto s1 = m->new_state();
    m->draft_head()->enable_draft(*s1);
    auto l1 = m->prefill(*s1, p);
    t0 = Clock::now();
    auto sp = engine::generate_greedy(*m, s1, l1, max_tokens, eos, depth, &st);
    sp_s += since(t0);
    sp_n += int64_t(sp.size());
    if (sp != ar) std::printf("MISMATCH: speculative output differs from AR\n");
  }
  // verify(D+1) vs decode on a warm state (median-free: 20 reps each).
  auto s = m->new_state();
  m->prefill(*s, prompts[0]);
  std::vector<int32_t> rows(size_t(depth + 1), 360);
  double dec = 0, ver = 0;
  for (int r = 0; r < 20; ++r) {
    auto c = s->clone();
    auto t0 = Clock::now();
    m->decode(*c, 360);
    dec += since(t0);
    c = s->clone();
    t0 = Clock::now();
    m->verify(*c, rows);
    ver += since(t0);
  }
  std::printf("model %s depth %d max_tokens %lld\n", argv[1], depth, (long long)max_tokens);
  std::printf("AR:   %lld tokens %.3f s  %.1f tok/s\n", (long long)ar_n, ar_s, ar_n / ar_s);
  std::printf("spec: %lld tokens %.3f s  %.1f tok/s  (x%.2f vs AR)\n", (long long)sp_n, sp_s, sp_n / sp_s,
              (sp_n / sp_s) / (ar_n / ar_s));
  std::printf("acceptance %.3f (%lld/%lld drafted), cycles %lld, bonus %lld, repairs %lld, full_replays %lld\n",
              st.acceptance(), (long long)st.accepted, (long long)st.drafted, (long long)st.cycles,
              (long long)st.bonus, (long long)st.repairs, (long long)st.full_replays);
  std::printf("draft %.3f s  verify %.3f s  commit %.3f s\n", st.draft_s, st.verify_s, st.commit_s);
  std::printf("verify(%d)/decode cost ratio %.2f (decode %.2f ms, verify %.2f ms)\n", depth + 1, ver / dec,
              1e3 * dec / 20, 1e3 * ver / 20);
  return 0;
}
