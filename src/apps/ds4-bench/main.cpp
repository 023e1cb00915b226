// ds4-bench: prefill and decode tokens/s over a sweep of context sizes, measured inside the
// engine (no HTTP, no sampling beyond argmax). Flags follow antirez/ds4's ds4-bench
// (--prompt-file --ctx-start --ctx-max --step-incr --gen-tokens --csv) and so does the CSV,
// so either tool can be the other's --compare peer.
//
//   ds4-bench -m models/default --ctx-start 512 --ctx-max 32768 --gen-tokens 64 --csv out.csv
//   ds4-bench -m M ... --compare 'python3 peer.py --ctx-start {ctx_start} ... --csv {csv}'
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "apps/ds4-bench/compare.h"
#include "apps/ds4-bench/progress.h"
#include "apps/ds4-bench/sweep.h"
#include "core/error.h"
#include "models/model.h"
#include "tokenizer/tokenizer.h"

namespace fs = std::filesystem;
using namespace ds4;
using namespace ds4::bench;

namespace {

const char* kUsage =
    "usage: ds4-bench -m MODEL [--prompt-file FILE] [--tokenizer tokenizer.json]\n"
    "                 [--ctx-start N=512] [--ctx-max N=32768] [--step-incr N (0: double)]\n"
    "                 [--gen-tokens N=64] [--csv FILE] [--threads N] [--chunk N]\n"
    "                 [--progress auto|on|off] [--no-warmup] [--repeats N=1]\n"
    "                 [--compare CMD [--compare-csv FILE]]\n"
    "Without --prompt-file the prompt is fixed pseudo-random token ids. --repeats runs the\n"
    "sweep N times (fresh state each) and writes the per-row median rates. CMD placeholders:\n"
    "{model} {prompt_file} {ctx_start} {ctx_max} {step_incr} {gen_tokens} {csv}.\n";

struct Args {
  std::string model, prompt_file, tokenizer, csv, compare, compare_csv, progress = "auto";
  int64_t ctx_start = 512, ctx_max = 32768, step = 0, gen = 64, chunk = 0;
  int threads = 0, repeats = 1;
  bool warmup = true;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    auto val = [&]() -> std::string {
      if (i + 1 >= argc) throw InputError(k + " needs a value\n" + kUsage);
      return argv[++i];
    };
    auto num = [&]() -> int64_t {
      const std::string v = val();
      size_t used = 0;
      int64_t n = 0;
      try {
        n = std::stoll(v, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used != v.size()) throw InputError(k + ": '" + v + "' is not an integer");
      return n;
    };
    if (k == "-m" || k == "--model") a.model = val();
    else if (k == "--prompt-file") a.prompt_file = val();
    else if (k == "--tokenizer") a.tokenizer = val();
    else if (k == "--ctx-start") a.ctx_start = num();
    else if (k == "--ctx-max") a.ctx_max = num();
    else if (k == "--step-incr") a.step = num();
    else if (k == "--gen-tokens") a.gen = num();
    else if (k == "--csv") a.csv = val();
    else if (k == "--threads") a.threads = int(num());
    else if (k == "--chunk") a.chunk = num();
    else if (k == "--progress") a.progress = val();
    else if (k == "--no-warmup") a.warmup = false;
    else if (k == "--repeats") a.repeats = int(num());
    else if (k == "--compare") a.compare = val();
    else if (k == "--compare-csv") a.compare_csv = val();
    else if (k == "-h" || k == "--help") throw InputError(kUsage);
    else throw InputError("unknown option '" + k + "'\n" + kUsage);
  }
  if (a.model.empty()) throw InputError(std::string("-m MODEL is required\n") + kUsage);
  if (a.gen < 0) throw InputError("--gen-tokens must be >= 0");
  if (a.repeats < 1) throw InputError("--repeats must be >= 1");
  if (a.progress != "auto" && a.progress != "on" && a.progress != "off")
    throw InputError("--progress: '" + a.progress + "' is not auto, on or off");
  return a;
}

// Loading has no inner progress to report: show elapsed time while it runs (terminal only).
std::unique_ptr<Model> load_with_bar(const Args& a, const LoadOptions& lo) {
  Progress bar(a.progress);
  std::atomic<bool> done{false};
  std::thread ticker([&] {
    while (!done) {
      bar.update("loading " + a.model, 0, 0);
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
  std::unique_ptr<Model> m;
  try {
    m = load_model(a.model, lo);
  } catch (...) {
    done = true;
    ticker.join();
    bar.clear();
    throw;
  }
  done = true;
  ticker.join();
  bar.clear();
  return m;
}

std::vector<int32_t> text_tokens(const Args& a) {
  if (a.prompt_file.empty()) return {};
  std::ifstream f(a.prompt_file, std::ios::binary);
  if (!f) throw InputError("--prompt-file: cannot read " + a.prompt_file);
  std::stringstream ss;
  ss << f.rdbuf();
  std::string path = a.tokenizer;
  if (path.empty()) {
    const fs::path m(a.model);
    path = ((fs::is_directory(m) ? m : m.parent_path()) / "tokenizer.json").string();
  }
  if (!fs::exists(path)) throw InputError("--prompt-file needs a tokenizer: " + path + " does not exist");
  auto ids = tok::Tokenizer::load(path).encode(ss.str());
  if (ids.empty()) throw InputError("--prompt-file: " + a.prompt_file + " encodes to no tokens");
  return ids;
}

void print_row(const Row& r, void* out) {
  std::fprintf(stderr, "ds4-bench: ctx %6lld  prefill %6lld tok %9.1f tok/s  gen %4lld tok %8.1f tok/s  state %lld B\n",
               (long long)r.ctx_tokens, (long long)r.prefill_tokens, r.prefill_tps, (long long)r.gen_tokens,
               r.gen_tps, (long long)r.kvcache_bytes);
  if (auto* f = static_cast<FILE*>(out)) {
    std::fprintf(f, "%s\n", csv_line(r).c_str());
    std::fflush(f);
  }
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Runs the sweep `repeats` times; one repeat streams its rows to `out` as they come, more
// repeats write the per-row medians at the end (a shared machine's stalls hit single rows).
std::vector<Row> sweeps(Model& model, const std::vector<int32_t>& tokens, const SweepOptions& opt, int repeats,
                        FILE* out) {
  if (repeats == 1) return run_sweep(model, tokens, opt, print_row, out);
  std::vector<std::vector<Row>> all;
  for (int r = 0; r < repeats; ++r) {
    std::fprintf(stderr, "ds4-bench: repeat %d/%d\n", r + 1, repeats);
    all.push_back(run_sweep(model, tokens, opt, print_row, nullptr));
  }
  std::vector<Row> med = all[0];
  for (size_t i = 0; i < med.size(); ++i) {
    std::vector<double> p, g;
    for (const auto& rows : all) {
      p.push_back(rows[i].prefill_tps);
      g.push_back(rows[i].gen_tps);
    }
    med[i].prefill_tps = median(p);
    med[i].gen_tps = median(g);
    std::fprintf(out, "%s\n", csv_line(med[i]).c_str());
  }
  std::fprintf(stderr, "ds4-bench: CSV rows are medians over %d repeats\n", repeats);
  return med;
}

int run(int argc, char** argv) {
  Args a = parse(argc, argv);
  LoadOptions lo;
  lo.threads = a.threads;
  lo.max_context = a.ctx_max + a.gen;
  const auto t0 = std::chrono::steady_clock::now();
  auto model = load_with_bar(a, lo);
  const double load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const ModelInfo& info = model->info();
  if (info.max_context > 0 && a.ctx_max + a.gen > info.max_context) {
    const int64_t cap = info.max_context - a.gen;
    std::fprintf(stderr, "ds4-bench: --ctx-max %lld + %lld generated exceeds the model's context %lld: capped at %lld\n",
                 (long long)a.ctx_max, (long long)a.gen, (long long)info.max_context, (long long)cap);
    a.ctx_max = cap;
  }
  SweepOptions opt;
  opt.frontiers = frontiers(a.ctx_start, a.ctx_max, a.step);
  opt.gen_tokens = a.gen;
  opt.chunk = a.chunk;
  opt.progress = a.progress;
  const auto text = text_tokens(a);
  const auto tokens = prompt_tokens(text, a.ctx_max, info.vocab_size, info.eos_token_ids);
  std::fprintf(stderr, "ds4-bench: model %s (%s, vocab %lld, context %lld), load %.3f s, prompt %s, chunk %lld\n",
               a.model.c_str(), info.family.c_str(), (long long)info.vocab_size, (long long)info.max_context, load_s,
               text.empty() ? "pseudo-random ids" : (a.prompt_file + " (" + std::to_string(text.size()) +
                                                     " tokens, repeated to fill)").c_str(),
               (long long)(a.chunk > 0 ? a.chunk : info.default_prefill_chunk));
  if (a.warmup) {  // touches weights and warms caches; not part of any row
    SweepOptions w = opt;
    w.frontiers = {std::min<int64_t>(a.ctx_start, 128)};
    w.gen_tokens = std::min<int64_t>(a.gen, 4);
    const auto r = run_sweep(*model, tokens, w, nullptr, nullptr);
    std::fprintf(stderr, "ds4-bench: warmup %lld + %lld tokens, %.3f s\n", (long long)r[0].prefill_tokens,
                 (long long)r[0].gen_tokens, r[0].prefill_s + r[0].gen_s);
  }
  FILE* out = a.csv.empty() ? stdout : std::fopen(a.csv.c_str(), "w");
  if (!out) throw InputError("--csv: cannot write " + a.csv);
  std::fprintf(out, "%s\n", csv_header().c_str());
  const auto rows = sweeps(*model, tokens, opt, a.repeats, out);
  if (out != stdout) std::fclose(out);
  if (a.compare.empty()) return 0;
  const std::map<std::string, std::string> vars = {
      {"model", a.model}, {"prompt_file", a.prompt_file}, {"ctx_start", std::to_string(a.ctx_start)},
      {"ctx_max", std::to_string(a.ctx_max)}, {"step_incr", std::to_string(a.step)}, {"gen_tokens", std::to_string(a.gen)}};
  const auto peer = parse_peer_csv(run_peer(a.compare, vars), "--compare peer CSV");
  const std::string table = ratio_csv(rows, peer);
  std::fprintf(stderr, "ds4-bench: ours / peer (ratio > 1: ds4-bench faster)\n%s", table.c_str());
  if (!a.compare_csv.empty()) {
    std::ofstream f(a.compare_csv);
    if (!f) throw InputError("--compare-csv: cannot write " + a.compare_csv);
    f << table;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const InputError& e) {
    std::fprintf(stderr, "ds4-bench: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ds4-bench: error: %s\n", e.what());
    return 1;
  }
}
