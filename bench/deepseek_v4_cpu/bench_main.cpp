// bench_deepseek_v4_cpu MODEL PROMPT_TOKENS DECODE_TOKENS THREADS
// Prefill of PROMPT_TOKENS fixed ids in one chunk, then DECODE_TOKENS greedy decode steps.
// Prints one JSON line: {"prefill_s", "prefill_tok_s", "decode_s", "decode_tok_s", "first_tokens"}.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "models/model.h"

namespace {
int32_t argmax(const std::vector<float>& x) {
  size_t b = 0;
  for (size_t i = 1; i < x.size(); ++i)
    if (x[i] > x[b]) b = i;
  return int32_t(b);
}
double since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: %s MODEL PROMPT_TOKENS DECODE_TOKENS THREADS\n", argv[0]);
    return 2;
  }
  ds4::LoadOptions opt;
  opt.threads = std::atoi(argv[4]);
  auto m = ds4::load_model(argv[1], opt);
  const int n = std::atoi(argv[2]), d = std::atoi(argv[3]);
  const int64_t V = m->info().vocab_size;
  std::vector<int32_t> prompt(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) prompt[size_t(i)] = int32_t(2 + (int64_t(i) * 7919) % (V - 2));  // same ids as run_bench.py
  auto st = m->new_state();
  auto t0 = std::chrono::steady_clock::now();
  auto logits = m->prefill(*st, prompt, n);
  const double tp = since(t0);
  std::vector<int32_t> out;
  t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < d; ++i) {
    out.push_back(argmax(logits));
    logits = m->decode(*st, out.back());
  }
  const double td = since(t0);
  std::printf("{\"prefill_s\": %.6f, \"prefill_tok_s\": %.3f, \"decode_s\": %.6f, \"decode_tok_s\": %.3f, \"first_tokens\": [",
              tp, n / tp, td, d / td);
  for (size_t i = 0; i < out.size() && i < 8; ++i) std::printf("%s%d", i ? ", " : "", out[i]);
  std::printf("]}\n");
  return 0;
}
