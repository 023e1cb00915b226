// `ds4server run`: load any registered model family, prefill a prompt, generate tokens
// (greedy, or temperature sampling with a seed). The prompt is text (-p, encoded as plain
// text with the model's tokenizer.json or --tokenizer, no chat template: a completion) or
// token ids (--tokens, output printed as ids). The full samplers (top-k/top-p, the
// reference RNG streams) live in the engine; this is the smallest honest driver.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "apps/ds4server/app_model.h"
#include "apps/ds4server/commands.h"
#include "core/error.h"
#include "models/model.h"
#include "tokenizer/tokenizer.h"

namespace ds4::cli {
namespace {

struct RunArgs {
  std::string model, prompt, tokenizer;
  std::vector<int32_t> tokens;
  int64_t max_tokens = 32;
  double temp = 0.0;
  uint64_t seed = 12345;
  int threads = 0;
  int64_t chunk = 0;
  std::string backend = "cpu";
};

const char* kUsage =
    "usage: ds4server run --model PATH (--tokens ID,ID,... | -p TEXT [--tokenizer tokenizer.json])\n"
    "                     [--max-tokens N] [--temp T] [--seed S] [--threads N] [--chunk N]\n"
    "                     [--backend cpu|cuda]   (cuda: Qwen3.8 Flash Next, DeepSeek V4; DS4_CUDA builds)\n";

std::vector<int32_t> parse_ids(const std::string& s) {
  std::vector<int32_t> ids;
  std::string item;
  std::stringstream ss(s);
  while (std::getline(ss, item, ',')) {
    std::stringstream words(item);
    std::string w;
    while (words >> w) {
      size_t used = 0;
      long v = 0;
      try {
        v = std::stol(w, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used != w.size() || v < 0 || v > INT32_MAX) throw InputError("--tokens: '" + w + "' is not a token id");
      ids.push_back(int32_t(v));
    }
  }
  if (ids.empty()) throw InputError("--tokens: no token ids given");
  return ids;
}

RunArgs parse(const Args& a) {
  RunArgs r;
  for (size_t i = 0; i < a.size(); ++i) {
    const std::string& k = a[i];
    auto val = [&]() -> const std::string& {
      if (i + 1 >= a.size()) throw InputError(k + " needs a value\n" + kUsage);
      return a[++i];
    };
    auto num = [&](const std::string& v) {
      try {
        size_t used = 0;
        const double d = std::stod(v, &used);
        if (used != v.size() || !std::isfinite(d)) throw std::invalid_argument(v);
        return d;
      } catch (const std::exception&) {
        throw InputError(k + ": '" + v + "' is not a number");
      }
    };
    if (k == "--model" || k == "-m") r.model = val();
    else if (k == "--prompt" || k == "-p") r.prompt = val();
    else if (k == "--tokens") r.tokens = parse_ids(val());
    else if (k == "--tokenizer") r.tokenizer = val();
    else if (k == "--max-tokens" || k == "-n") r.max_tokens = int64_t(num(val()));
    else if (k == "--temp") r.temp = num(val());
    else if (k == "--seed") r.seed = uint64_t(num(val()));
    else if (k == "--threads") r.threads = int(num(val()));
    else if (k == "--chunk") r.chunk = int64_t(num(val()));
    else if (k == "--backend") r.backend = val();
    else throw InputError("unknown option '" + k + "'\n" + kUsage);
  }
  if (r.model.empty()) throw InputError(std::string("--model is required\n") + kUsage);
  if (r.tokens.empty() && r.prompt.empty()) throw InputError(std::string("give --tokens or -p\n") + kUsage);
  if (!r.prompt.empty() && !r.tokens.empty()) throw InputError("give either --tokens or -p, not both");
  if (r.max_tokens < 0) throw InputError("--max-tokens must be >= 0");
  if (r.temp < 0) throw InputError("--temp must be >= 0");
  return r;
}

// Greedy at T = 0 (ties: lowest id); else a draw from softmax(logits / T).
int32_t sample(const std::vector<float>& logits, double temp, std::mt19937_64& rng) {
  size_t best = 0;
  for (size_t i = 1; i < logits.size(); ++i)
    if (logits[i] > logits[best]) best = i;
  if (temp == 0.0) return int32_t(best);
  std::vector<double> p(logits.size());
  double sum = 0;
  for (size_t i = 0; i < p.size(); ++i) sum += p[i] = std::exp((double(logits[i]) - logits[best]) / temp);
  double u = std::uniform_real_distribution<double>(0.0, sum)(rng);
  for (size_t i = 0; i < p.size(); ++i)
    if ((u -= p[i]) < 0) return int32_t(i);
  return int32_t(best);
}

}  // namespace

int cmd_run(const Args& args) {
  const RunArgs r = parse(args);
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  LoadOptions lo;
  lo.threads = r.threads;
  auto model = load_model_on(r.model, lo, r.backend);
  // Text mode: the tokenizer next to the model unless --tokenizer names one.
  std::unique_ptr<tok::Tokenizer> tk;
  std::vector<int32_t> prompt = r.tokens;
  if (!r.prompt.empty()) {
    std::string path = r.tokenizer;
    if (path.empty()) {
      const std::filesystem::path m(r.model);
      path = ((std::filesystem::is_directory(m) ? m : m.parent_path()) / "tokenizer.json").string();
    }
    if (!std::filesystem::exists(path))
      throw InputError("-p needs a tokenizer: " + path + " does not exist (pass --tokenizer or use --tokens)");
    tk = std::make_unique<tok::Tokenizer>(tok::Tokenizer::load(path));
    prompt = tk->encode(r.prompt);
    if (prompt.empty()) throw InputError("-p: the prompt encodes to no tokens");
  }
  const auto t1 = clock::now();
  auto state = model->new_state();
  auto logits = model->prefill(*state, prompt, r.chunk);
  const auto t2 = clock::now();
  std::mt19937_64 rng(r.seed);
  const auto& eos = model->info().eos_token_ids;
  std::vector<int32_t> out;
  std::string finish = "length";
  std::unique_ptr<tok::StreamDecoder> detok;
  if (tk) detok = std::make_unique<tok::StreamDecoder>(*tk);
  for (int64_t i = 0; i < r.max_tokens; ++i) {
    const int32_t tok = sample(logits, r.temp, rng);
    if (std::find(eos.begin(), eos.end(), tok) != eos.end()) {
      finish = "eos";
      break;
    }
    out.push_back(tok);
    // An id the tokenizer does not know (a tokenizer smaller than the model's vocabulary)
    // prints as [id] instead of ending the run.
    if (detok && tok < tk->vocab_size()) std::fputs(detok->push(tok).c_str(), stdout);
    else if (detok) std::printf("[%d]", tok);
    else std::printf(i ? " %d" : "%d", tok);
    std::fflush(stdout);
    if (i + 1 < r.max_tokens) logits = model->decode(*state, tok);
  }
  if (detok) std::fputs(detok->finish().c_str(), stdout);
  std::printf("\n");
  const auto t3 = clock::now();
  auto secs = [](auto a, auto b) { return std::chrono::duration<double>(b - a).count(); };
  const double dec_steps = double(out.empty() ? 0 : out.size() - 1);
  std::fprintf(stderr,
               "[run] family %s, load %.3f s, prefill %zu tokens %.3f s (%.1f tok/s), generated %zu (%s), "
               "decode %.1f tok/s, temp %g seed %llu\n",
               model->info().family.c_str(), secs(t0, t1), prompt.size(), secs(t1, t2),
               double(prompt.size()) / std::max(secs(t1, t2), 1e-9), out.size(), finish.c_str(),
               dec_steps / std::max(secs(t2, t3), 1e-9), r.temp, (unsigned long long)r.seed);
  return 0;
}

}  // namespace ds4::cli
