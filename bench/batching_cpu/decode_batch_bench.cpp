// The decode step alone, without the server: N sequences stepping once each, as N
// forward() calls (the engine without batching) and as one Model::decode_batch call (each
// weight read once), interleaved in the same run; the rows are checked equal bit for bit.
//   bench_decode_batch MODEL [--threads T] [--batches 1,4,16] [--steps 20] [--prompt 32]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "models/model.h"

using namespace ds4;
using Clock = std::chrono::steady_clock;

namespace {

double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

struct Seqs {
  std::vector<std::unique_ptr<ModelState>> states;
  std::vector<int32_t> next;
};

Seqs prefilled(Model& m, int n, int prompt) {
  Seqs s;
  const int64_t V = m.info().vocab_size;
  for (int i = 0; i < n; ++i) {
    std::vector<int32_t> p;
    for (int k = 0; k < prompt; ++k) p.push_back(int32_t(1 + (977 * (i + 1) + 131 * k) % (V - 1)));
    s.states.push_back(m.new_state());
    const std::vector<float> lg = m.prefill(*s.states.back(), p);
    s.next.push_back(int32_t(std::max_element(lg.begin(), lg.end()) - lg.begin()));
  }
  return s;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s MODEL [--threads T] [--batches 1,4,16] [--steps 20] [--prompt 32]\n", argv[0]);
    return 2;
  }
  LoadOptions lo;
  lo.threads = 2;
  std::string batches = "1,4,16";
  int steps = 20, prompt = 32;
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--threads") lo.threads = std::stoi(v);
    else if (k == "--batches") batches = v;
    else if (k == "--steps") steps = std::stoi(v);
    else if (k == "--prompt") prompt = std::stoi(v);
    else return std::fprintf(stderr, "unknown option %s\n", k.c_str()), 2;
  }
  auto m = load_model(argv[1], lo);
  const size_t V = size_t(m->info().vocab_size);
  std::printf("model %s (%s), threads %d, batched_decode %s, %d steps per batch size, prompt %d\n", argv[1],
              m->info().family.c_str(), lo.threads, m->info().batched_decode ? "native" : "fallback loop", steps, prompt);
  std::printf("| N | loop ms/step | batched ms/step | loop tok/s | batched tok/s | speedup | rows equal |\n");
  std::printf("|---|---|---|---|---|---|---|\n");
  std::stringstream ss(batches);
  for (std::string tok; std::getline(ss, tok, ',');) {
    const int n = std::stoi(tok);
    Seqs a = prefilled(*m, n, prompt), b = prefilled(*m, n, prompt);
    std::vector<double> loop_ms, batch_ms;
    bool equal = true;
    std::vector<float> rows, row;
    for (int s = 0; s < steps; ++s) {
      // Alternate which path runs first so drift hits both alike.
      for (int pass = 0; pass < 2; ++pass) {
        if ((pass == 0) == (s % 2 == 0)) {
          const auto t0 = Clock::now();
          std::vector<std::vector<float>> got(static_cast<size_t>(n));
          for (int i = 0; i < n; ++i) m->forward(*a.states[size_t(i)], std::span(&a.next[size_t(i)], 1), Logits::kLast, got[size_t(i)]);
          loop_ms.push_back(ms_since(t0));
          for (int i = 0; i < n; ++i)
            a.next[size_t(i)] = int32_t(std::max_element(got[size_t(i)].begin(), got[size_t(i)].end()) - got[size_t(i)].begin());
          row.clear();
          for (auto& g : got) row.insert(row.end(), g.begin(), g.end());
        } else {
          std::vector<ModelState*> st;
          for (auto& p : b.states) st.push_back(p.get());
          const auto t0 = Clock::now();
          m->decode_batch(st, b.next, rows);
          batch_ms.push_back(ms_since(t0));
          for (int i = 0; i < n; ++i)
            b.next[size_t(i)] = int32_t(std::max_element(rows.begin() + long(i * V), rows.begin() + long((i + 1) * V)) -
                                        (rows.begin() + long(i * V)));
        }
      }
      equal = equal && rows.size() == row.size() && std::memcmp(rows.data(), row.data(), rows.size() * sizeof(float)) == 0;
    }
    const double lm = median(loop_ms), bm = median(batch_ms);
    std::printf("| %d | %.3f | %.3f | %.1f | %.1f | %.2fx | %s |\n", n, lm, bm, 1e3 * n / lm, 1e3 * n / bm, lm / bm,
                equal ? "yes" : "NO");
  }
  return 0;
}
