// Times prefill of a prompt (one chunk) and greedy decode on a GLM 5.x checkpoint.
// usage: glm5_cpu_bench MODEL_DIR PROMPT_TOKENS DECODE_TOKENS THREADS
// Prints one JSON line: {"prefill_s":..,"decode_s":..,"prefill_tok_s":..,"decode_tok_s":..,"tokens":[..]}
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "models/model.h"

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: glm5_cpu_bench MODEL_DIR PROMPT_TOKENS DECODE_TOKENS THREADS\n");
    return 2;
  }
  const int n_prompt = std::atoi(argv[2]), n_decode = std::atoi(argv[3]);
  ds4::LoadOptions opt;
  opt.threads = std::atoi(argv[4]);
  auto model = ds4::load_model(argv[1], opt);
  const int64_t vocab = model->info().vocab_size;
  // Same prompt as bench.py: token i = (i * 7919 + 13) % (vocab - 1).
  std::vector<int32_t> prompt(static_cast<size_t>(n_prompt));
  for (int i = 0; i < n_prompt; ++i) prompt[size_t(i)] = int32_t((int64_t(i) * 7919 + 13) % (vocab - 1));
  using clock = std::chrono::steady_clock;
  auto st = model->new_state();
  auto t0 = clock::now();
  auto logits = model->prefill(*st, prompt, n_prompt);
  auto t1 = clock::now();
  std::vector<int32_t> out;
  for (int i = 0; i < n_decode; ++i) {
    const int32_t next = int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
    out.push_back(next);
    logits = model->decode(*st, next);
  }
  auto t2 = clock::now();
  const double pf = std::chrono::duration<double>(t1 - t0).count(), dc = std::chrono::duration<double>(t2 - t1).count();
  std::printf("{\"prefill_s\": %.6f, \"decode_s\": %.6f, \"prefill_tok_s\": %.3f, \"decode_tok_s\": %.3f, \"tokens\": [",
              pf, dc, n_prompt / pf, n_decode / dc);
  for (size_t i = 0; i < out.size(); ++i) std::printf("%s%d", i ? ", " : "", out[i]);
  std::printf("]}\n");
  return 0;
}
