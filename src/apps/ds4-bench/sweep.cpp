#include "apps/ds4-bench/sweep.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "apps/ds4-bench/progress.h"
#include "core/error.h"

namespace ds4::bench {
namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

int32_t argmax(const std::vector<float>& v) {
  return int32_t(std::max_element(v.begin(), v.end()) - v.begin());
}

}  // namespace

std::vector<int64_t> frontiers(int64_t start, int64_t max, int64_t step) {
  if (start <= 0) throw InputError("--ctx-start must be > 0 (got " + std::to_string(start) + ")");
  if (max < start) throw InputError("--ctx-max (" + std::to_string(max) + ") is below --ctx-start (" +
                                    std::to_string(start) + ")");
  if (step < 0) throw InputError("--step-incr must be >= 0 (got " + std::to_string(step) + ")");
  std::vector<int64_t> f;
  for (int64_t c = start; c < max; c = step > 0 ? c + step : c * 2) f.push_back(c);
  f.push_back(max);
  return f;
}

std::vector<int32_t> prompt_tokens(const std::vector<int32_t>& text_tokens, int64_t n, int64_t vocab,
                                   const std::vector<int32_t>& avoid) {
  std::vector<int32_t> out;
  out.reserve(size_t(n));
  if (!text_tokens.empty()) {
    while (int64_t(out.size()) < n)
      out.insert(out.end(), text_tokens.begin(),
                 text_tokens.begin() + std::min<int64_t>(int64_t(text_tokens.size()), n - int64_t(out.size())));
    return out;
  }
  // A fixed LCG: the same ids on every machine and run, so two runs do the same work.
  uint64_t x = 0x9E3779B97F4A7C15ull;
  while (int64_t(out.size()) < n) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    const int32_t id = int32_t((x >> 33) % uint64_t(vocab));
    if (std::find(avoid.begin(), avoid.end(), id) == avoid.end()) out.push_back(id);
  }
  return out;
}

std::vector<Row> run_sweep(Model& model, const std::vector<int32_t>& tokens, const SweepOptions& opt,
                           void (*on_row)(const Row&, void*), void* ctx) {
  const int64_t chunk = opt.chunk > 0 ? opt.chunk : model.info().default_prefill_chunk;
  const int64_t work = opt.frontiers.back() + opt.gen_tokens * int64_t(opt.frontiers.size());
  Progress bar(opt.progress);
  auto state = model.new_state();
  std::vector<float> logits;
  std::vector<Row> rows;
  int64_t done = 0;  // tokens processed so far (prefill + generated), for the bar
  for (const int64_t f : opt.frontiers) {
    Row r;
    r.ctx_tokens = f;
    r.prefill_tokens = f - state->position();
    const std::string label = "ctx " + std::to_string(f);
    // Prefill in chunks (what Model::prefill does) so the bar moves inside a long frontier.
    auto t0 = Clock::now();
    for (int64_t p = state->position(); p < f; p += chunk) {
      const int64_t n = std::min(chunk, f - p);
      const bool last = p + n == f;
      model.forward(*state, std::span<const int32_t>(tokens.data() + p, size_t(n)),
                    last ? Logits::kLast : Logits::kNone, logits);
      done += n;
      bar.update(label + " prefill", done, work);
    }
    r.prefill_s = since(t0);
    r.prefill_tps = double(r.prefill_tokens) / std::max(r.prefill_s, 1e-9);
    r.kvcache_bytes = int64_t(state->bytes());
    // Greedy generation on a clone; EOS is not a stop here, so every frontier generates the
    // same number of tokens.
    if (opt.gen_tokens > 0) {
      auto g = state->clone();
      std::vector<float> gl = logits;
      t0 = Clock::now();
      for (int64_t i = 0; i < opt.gen_tokens; ++i) {
        const int32_t tok = argmax(gl);
        gl = model.decode(*g, tok);
        bar.update(label + " decode", ++done, work);
      }
      r.gen_s = since(t0);
      r.gen_tokens = opt.gen_tokens;
      r.gen_tps = double(r.gen_tokens) / std::max(r.gen_s, 1e-9);
    }
    bar.clear();
    rows.push_back(r);
    if (on_row) on_row(r, ctx);
  }
  return rows;
}

std::string csv_header() { return "ctx_tokens,prefill_tokens,prefill_tps,gen_tokens,gen_tps,kvcache_bytes"; }

std::string csv_line(const Row& r) {
  char buf[256];
  std::snprintf(buf, sizeof buf, "%lld,%lld,%.2f,%lld,%.2f,%lld", (long long)r.ctx_tokens,
                (long long)r.prefill_tokens, r.prefill_tps, (long long)r.gen_tokens, r.gen_tps,
                (long long)r.kvcache_bytes);
  return buf;
}

}  // namespace ds4::bench
