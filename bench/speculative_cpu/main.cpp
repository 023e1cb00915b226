// bench_speculative MODEL_DIR [max_tokens=200] [depth=3] [threads=0] [prompts.txt] [temperature=0]
// AR vs speculative decoding on the same chat prompts, same process: tok/s of each,
// acceptance, draft/verify/commit time, and the verify(D+1)/decode cost ratio.
// prompts.txt: one prompt per line as token ids (render_prompts.py writes eval.py's).
// temperature > 0: the family's sampler with its defaults (MTPLX for Qwen, ds4's for GLM /
// DeepSeek), seed 12345, category exact.
// A 7th argument `eval_protocol` runs tools/train/eval.py's acceptance protocol instead.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/speculative.h"
#include "models/model.h"

using namespace ds4;
using Clock = std::chrono::steady_clock;
static double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// tools/train/eval.py's Runner.speculative protocol, for a like-for-like acceptance figure:
// each step takes y = argmax of a fresh trunk pass, drafts 3 after y, verifies [y, drafts],
// appends y + the accepted drafts + the target's token at the first miss (or the bonus),
// and stops once n new tokens are reached or y / an appended token is a stop id. Acceptance
// is counted per step over the full depth, as eval.py does.
static void eval_protocol(Model& m, const std::vector<std::vector<int32_t>>& prompts, const std::vector<int32_t>& eos,
                          int64_t n, int depth) {
  const int64_t V = m.info().vocab_size;
  auto stop = [&](int32_t t) { return std::find(eos.begin(), eos.end(), t) != eos.end(); };
  int64_t drafted = 0, accepted = 0, steps = 0;
  for (size_t p = 0; p < prompts.size(); ++p) {
    auto s = m.new_state();
    m.draft_head()->enable_draft(*s);
    auto logits = m.prefill(*s, prompts[p]);
    int64_t made = 0, pd = 0, pa = 0;
    bool done = false;
    while (made < n && !done) {
      const int32_t y = engine::argmax(logits.data(), V);
      if (stop(y)) { ++made; break; }
      std::vector<int32_t> drafts;
      m.draft_head()->draft(*s, y, depth, drafts);
      std::vector<int32_t> rows_in = {y};
      rows_in.insert(rows_in.end(), drafts.begin(), drafts.end());
      auto trial = s->clone();
      auto rows = m.verify(*trial, rows_in);
      int acc = 0;
      while (acc < depth && engine::argmax(rows.data() + int64_t(acc) * V, V) == drafts[size_t(acc)]) ++acc;
      steps++, pd += depth, pa += acc;
      std::vector<int32_t> add = {y};
      add.insert(add.end(), drafts.begin(), drafts.begin() + acc);
      add.push_back(engine::argmax(rows.data() + int64_t(acc) * V, V));
      size_t k = 0;
      for (; k < add.size(); ++k) {
        ++made;
        if (stop(add[k])) { done = true; ++k; break; }
      }
      logits = m.verify(*s, std::span<const int32_t>(add.data(), k));
      logits.erase(logits.begin(), logits.end() - V);
    }
    std::printf("prompt %zu: %lld new tokens, accepted %lld of %lld drafted\n", p, (long long)made, (long long)pa,
                (long long)pd);
    drafted += pd, accepted += pa;
  }
  std::printf("eval.py protocol, depth %d: accepted %lld of %lld drafted = %.3f over %lld steps (%.2f per step)\n",
              depth, (long long)accepted, (long long)drafted, double(accepted) / double(drafted), (long long)steps,
              double(accepted) / double(steps));
}

int main(int argc, char** argv) {
  if (argc < 2) { std::fprintf(stderr, "usage: bench_speculative MODEL_DIR [max_tokens] [depth] [threads]\n"); return 2; }
  const int64_t max_tokens = argc > 2 ? std::stoll(argv[2]) : 200;
  const int depth = argc > 3 ? std::stoi(argv[3]) : 3;
  LoadOptions opt;
  opt.threads = argc > 4 ? std::stoi(argv[4]) : 0;
  auto m = load_model(argv[1], opt);
  // Stop ids: the model's, plus generation_config.json's (models/default ends a chat turn on
  // <|im_end|>, which config.json does not list), the set eval.py stops on.
  std::vector<int32_t> eos = m->info().eos_token_ids;
  if (std::ifstream g(std::string(argv[1]) + "/generation_config.json"); g) {
    const auto j = nlohmann::json::parse(g);
    if (j.contains("eos_token_id") && j["eos_token_id"].is_array())
      for (const auto& v : j["eos_token_id"]) eos.push_back(v.get<int32_t>());
  }
  // Chat prompts in models/default's tokenizer (ChatML user turn + assistant header).
  std::vector<std::vector<int32_t>> prompts = {
      {8167, 345, 198, 1620, 358, 257, 611, 6189, 786, 257, 1938, 632, 3775, 82, 323, 5689, 13, 8168, 198, 8167, 360, 198},
      {8167, 345, 198, 1008, 1367, 3854, 526, 870, 8081, 585, 298, 867, 4483, 13, 8168, 198, 8167, 360, 198},
      {8167, 345, 198, 925, 257, 708, 372, 786, 275, 3283, 434, 3722, 13, 8168, 198, 8167, 360, 198},
      {8167, 345, 198, 450, 416, 2115, 285, 3769, 361, 3461, 257, 803, 678, 30, 8168, 198, 8167, 360, 198},
      {8167, 345, 198, 35, 1717, 593, 68, 1031, 4380, 466, 2035, 331, 396, 88, 467, 1082, 410, 13, 8168, 198, 8167, 360, 198},
      {8167, 345, 198, 3152, 470, 367, 1199, 257, 6149, 295, 7308, 30, 8168, 198, 8167, 360, 198},
  };
  if (argc > 5) {
    std::ifstream f(argv[5]);
    if (!f) { std::fprintf(stderr, "cannot open %s\n", argv[5]); return 2; }
    prompts.clear();
    for (std::string line; std::getline(f, line);) {
      std::istringstream in(line);
      std::vector<int32_t> ids;
      for (int32_t t; in >> t;) ids.push_back(t);
      if (!ids.empty()) prompts.push_back(ids);
    }
  }
  engine::SpecConfig sc;
  sc.depth = depth;
  // The family's own sampler (MTPLX for Qwen, ds4's for GLM / DeepSeek), as the engine uses.
  sc.sampler_kind = engine::sampler_kind_for_family(m->info().family);
  sc.sampler = engine::default_sampler_params(sc.sampler_kind);
  sc.sampler.temperature = argc > 6 ? std::stod(argv[6]) : 0.0;
  const bool sampled = sc.sampler.temperature > 0;
  sc.category = sampled ? engine::SpecCategory::kExact : engine::SpecCategory::kGreedy;
  if (argc > 7 && std::string(argv[7]) == "eval_protocol") {
    eval_protocol(*m, prompts, eos, max_tokens, depth);
    return 0;
  }
  double ar_s = 0, sp_s = 0;
  int64_t ar_n = 0, sp_n = 0;
  engine::SpecStats st;
  for (const auto& p : prompts) {
    auto s0 = m->new_state();
    auto l0 = m->prefill(*s0, p);
    auto t0 = Clock::now();
    engine::SpecConfig arc = sc;
    arc.depth = 0;
    auto ar = sampled ? engine::generate_sampled(*m, s0, l0, max_tokens, eos, arc)
                      : engine::generate_greedy(*m, s0, l0, max_tokens, eos, 0);
    ar_s += since(t0);
    ar_n += int64_t(ar.size());
    auto s1 = m->new_state();
    m->draft_head()->enable_draft(*s1);
    auto l1 = m->prefill(*s1, p);
    t0 = Clock::now();
    engine::SpecStats one;
    auto sp = sampled ? engine::generate_sampled(*m, s1, l1, max_tokens, eos, sc, &one)
                      : engine::generate_greedy(*m, s1, l1, max_tokens, eos, depth, &one);
    st.add(one);
    std::printf("prompt %zu: %zu tokens, accepted %lld of %lld drafted\n", size_t(&p - prompts.data()), sp.size(),
                (long long)one.accepted, (long long)one.drafted);
    sp_s += since(t0);
    sp_n += int64_t(sp.size());
    if (sp != ar && !sampled) std::printf("MISMATCH: speculative output differs from AR\n");
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
  std::printf("model %s depth %d max_tokens %lld prompts %zu category %s temperature %g\n", argv[1], depth,
              (long long)max_tokens, prompts.size(), engine::spec_category_name(sc.category), sc.sampler.temperature);
  std::printf("AR:   %lld tokens %.3f s  %.1f tok/s\n", (long long)ar_n, ar_s, ar_n / ar_s);
  std::printf("spec: %lld tokens %.3f s  %.1f tok/s  (x%.2f vs AR)\n", (long long)sp_n, sp_s, sp_n / sp_s,
              (sp_n / sp_s) / (ar_n / ar_s));
  std::printf("acceptance %.3f (%lld/%lld drafted), %.2f accepted per cycle, cycles %lld, bonus %lld, "
              "corrections %lld, prefix_commits %lld, repairs %lld, full_replays %lld\n",
              st.acceptance(), (long long)st.accepted, (long long)st.drafted,
              st.cycles ? double(st.accepted) / double(st.cycles) : 0.0, (long long)st.cycles, (long long)st.bonus,
              (long long)st.corrections, (long long)st.prefix_commits, (long long)st.repairs, (long long)st.full_replays);
  std::printf("draft %.3f s  verify %.3f s  commit %.3f s\n", st.draft_s, st.verify_s, st.commit_s);
  if (sampled)  // lazily: only the rows the acceptance walk reached (of drafted + cycles verify rows)
    std::printf("target distributions materialized %lld of %lld verify rows\n", (long long)st.target_rows,
                (long long)(st.drafted + st.cycles));
  std::printf("verify(%d)/decode cost ratio %.2f (decode %.2f ms, verify %.2f ms)\n", depth + 1, ver / dec,
              1e3 * dec / 20, 1e3 * ver / 20);
  return 0;
}
