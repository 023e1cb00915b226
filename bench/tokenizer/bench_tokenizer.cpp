// Encode throughput of ds4's tokenizer on one thread: reads a JSONL corpus (one JSON string
// per line), encodes it `--repeat` times, prints tokens, seconds and tokens/s as JSON.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

int main(int argc, char** argv) {
  std::string tok_path, corpus_path;
  int repeat = 3;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--tokenizer") tok_path = argv[i + 1];
    else if (a == "--corpus") corpus_path = argv[i + 1];
    else if (a == "--repeat") repeat = std::stoi(argv[i + 1]);
  }
  if (tok_path.empty() || corpus_path.empty()) {
    std::fprintf(stderr, "usage: bench_tokenizer --tokenizer PATH --corpus FILE.jsonl [--repeat N]\n");
    return 2;
  }
  auto tk = ds4::tok::Tokenizer::load(tok_path);
  std::vector<std::string> texts;
  std::ifstream f(corpus_path);
  std::string line;
  size_t bytes = 0;
  while (std::getline(f, line)) {
    texts.push_back(nlohmann::json::parse(line).get<std::string>());
    bytes += texts.back().size();
  }
  double best = 1e30;
  size_t tokens = 0;
  for (int r = 0; r < repeat; ++r) {
    size_t n = 0;
    auto t0 = std::chrono::steady_clock::now();
    for (const auto& t : texts) n += tk.encode(t, true).size();
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::min(best, s);
    tokens = n;
  }
  std::printf("{\"texts\": %zu, \"bytes\": %zu, \"tokens\": %zu, \"seconds\": %.6f, \"tokens_per_s\": %.1f}\n",
              texts.size(), bytes, tokens, best, tokens / best);
  return 0;
}
