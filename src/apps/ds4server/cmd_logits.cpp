// `ds4server logits`: the model's logits over a fixed token sequence, fed in several ways, for
// the reference fuzzer (tools/reference/fuzz). The sequence is a prompt of P tokens followed by
// continuation tokens (the reference's greedy tokens, teacher-forced), so every mode computes
// the same rows and any difference between modes or against the reference is the model's.
//
// Row i of every output = the logits after consuming the first P + i tokens, i = 0 .. T - P.
// Modes (how the prompt goes in; the continuation is always one decode step per token except
// in `verify` and `all`):
//   onepass   the whole prompt in one forward pass
//   steps     the prompt one decode step per token
//   chunkN    the prompt through Model::prefill in chunks of N tokens
//   verify    the prompt in one pass, then the continuation in one multi-row pass (kAll)
//   all       the whole sequence in one kAll pass, rows P-1 .. T-1
// Each mode writes PREFIX.<mode>.f32: (T - P + 1) x vocab float32, little endian, row-major.
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "apps/ds4server/app_model.h"
#include "apps/ds4server/commands.h"
#include "core/error.h"
#include "models/model.h"

namespace ds4::cli {
namespace {

struct LogitsArgs {
  std::string model, tokens_file, out, backend = "cpu";
  std::vector<std::string> modes;
  int64_t prompt_len = 0;
  int threads = 0;
};

const char* kLogitsUsage =
    "usage: ds4server logits --model PATH --tokens-file FILE --prompt-len P --out PREFIX\n"
    "                        [--modes onepass,steps,chunk7,verify,all] [--backend cpu|cuda] [--threads N]\n"
    "  FILE: token ids separated by spaces, commas or newlines. Writes PREFIX.<mode>.f32 with\n"
    "  (T - P + 1) rows of vocab float32: row i = logits after the first P + i tokens.\n";

int64_t parse_count(const std::string& key, const std::string& v) {
  size_t used = 0;
  long long n = 0;
  try {
    n = std::stoll(v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != v.size() || n < 0) throw InputError(key + ": '" + v + "' is not a non-negative integer");
  return n;
}

std::vector<int32_t> read_token_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw InputError("--tokens-file: cannot open " + path);
  std::vector<int32_t> ids;
  std::string word;
  while (in >> word) {
    std::stringstream parts(word);
    std::string item;
    while (std::getline(parts, item, ',')) {
      if (item.empty()) continue;
      const int64_t v = parse_count("--tokens-file " + path, item);
      if (v > INT32_MAX) throw InputError("--tokens-file " + path + ": '" + item + "' is not a token id");
      ids.push_back(int32_t(v));
    }
  }
  return ids;
}

LogitsArgs parse_logits_args(const Args& a) {
  LogitsArgs r;
  std::string modes = "onepass,steps,chunk7";
  for (size_t i = 0; i < a.size(); ++i) {
    const std::string& k = a[i];
    auto val = [&]() -> const std::string& {
      if (i + 1 >= a.size()) throw InputError(k + " needs a value\n" + kLogitsUsage);
      return a[++i];
    };
    if (k == "--model" || k == "-m") r.model = val();
    else if (k == "--tokens-file") r.tokens_file = val();
    else if (k == "--prompt-len") r.prompt_len = parse_count(k, val());
    else if (k == "--out") r.out = val();
    else if (k == "--modes") modes = val();
    else if (k == "--backend") r.backend = val();
    else if (k == "--threads") r.threads = int(parse_count(k, val()));
    else throw InputError("unknown option '" + k + "'\n" + kLogitsUsage);
  }
  if (r.model.empty() || r.tokens_file.empty() || r.out.empty())
    throw InputError(std::string("--model, --tokens-file and --out are required\n") + kLogitsUsage);
  std::stringstream ss(modes);
  std::string m;
  while (std::getline(ss, m, ',')) {
    const bool chunk = m.rfind("chunk", 0) == 0 && m.size() > 5 && parse_count("--modes " + m, m.substr(5)) > 0;
    if (!chunk && m != "onepass" && m != "steps" && m != "verify" && m != "all")
      throw InputError("--modes: unknown mode '" + m + "' (onepass, steps, chunkN, verify, all)");
    r.modes.push_back(m);
  }
  if (r.modes.empty()) throw InputError("--modes: no mode given");
  return r;
}

// Appends one row (the last `vocab` floats of `logits`) to `rows`.
void push_last_row(const std::vector<float>& logits, int64_t vocab, std::vector<float>& rows) {
  if (int64_t(logits.size()) < vocab) throw Error("logits: the model returned fewer than vocab floats");
  rows.insert(rows.end(), logits.end() - vocab, logits.end());
}

std::vector<float> run_mode(Model& model, const std::string& mode, std::span<const int32_t> seq, int64_t p) {
  const int64_t vocab = model.info().vocab_size;
  const auto prompt = seq.first(size_t(p));
  const auto rest = seq.subspan(size_t(p));
  auto state = model.new_state();
  std::vector<float> rows, logits;
  if (mode == "all") {
    model.forward(*state, seq, Logits::kAll, logits);
    rows.assign(logits.begin() + (p - 1) * vocab, logits.end());
    return rows;
  }
  if (mode == "steps") {
    for (int32_t t : prompt) logits = model.decode(*state, t);
  } else if (mode == "onepass" || mode == "verify") {
    model.forward(*state, prompt, Logits::kLast, logits);
  } else {
    logits = model.prefill(*state, prompt, std::stoll(mode.substr(5)));
  }
  push_last_row(logits, vocab, rows);
  if (mode == "verify" && !rest.empty()) {
    model.forward(*state, rest, Logits::kAll, logits);
    rows.insert(rows.end(), logits.begin(), logits.end());
    return rows;
  }
  for (int32_t t : rest) push_last_row(model.decode(*state, t), vocab, rows);
  return rows;
}

}  // namespace

int cmd_logits(const Args& args) {
  const LogitsArgs r = parse_logits_args(args);
  const std::vector<int32_t> seq = read_token_file(r.tokens_file);
  if (r.prompt_len < 1 || r.prompt_len > int64_t(seq.size()))
    throw InputError("--prompt-len must be in 1.." + std::to_string(seq.size()) + " (the tokens in the file)");
  LoadOptions lo;
  lo.threads = r.threads;
  auto model = load_model_on(r.model, lo, r.backend);
  const int64_t vocab = model->info().vocab_size;
  for (int32_t t : seq)
    if (t >= vocab) throw InputError("--tokens-file: id " + std::to_string(t) + " is outside the vocabulary");
  for (const std::string& mode : r.modes) {
    const std::vector<float> rows = run_mode(*model, mode, seq, r.prompt_len);
    const std::string path = r.out + "." + mode + ".f32";
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(rows.data()), std::streamsize(rows.size() * sizeof(float)));
    if (!out) throw Error("logits: cannot write " + path);
  }
  return 0;
}

}  // namespace ds4::cli
