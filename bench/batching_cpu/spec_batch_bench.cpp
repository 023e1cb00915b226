// Speculative decoding with the verify batched across streams, without the server: N greedy
// streams, each cycle = its own draft + verify + commit (SpecDecoder::cycle, the engine
// without batched verify) vs every stream's draft, then ONE Model::verify_batch, then each
// stream's walk + commit (draft_window / finish_captured, the engine's batched path).
// Rounds alternate the two modes in the same run; the emitted tokens are checked equal.
//   bench_spec_batch MODEL [--threads T] [--streams 1,4] [--cycles 20] [--depth 3] [--prompt 32]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <stdexcept>
#include <sstream>
#include <string>
#include <vector>

#include "engine/speculative.h"
#include "models/draft_head.h"
#include "models/model.h"

using namespace ds4;
using Clock = std::chrono::steady_clock;

namespace {

double s_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

struct Streams {
  std::vector<std::unique_ptr<ModelState>> states;
  std::vector<std::unique_ptr<engine::SpecDecoder>> spec;
  std::vector<int32_t> next;
  std::vector<std::vector<int32_t>> emitted;
};

Streams start(Model& m, int n, int prompt, int depth) {
  Streams s;
  const int64_t V = m.info().vocab_size;
  for (int i = 0; i < n; ++i) {
    std::vector<int32_t> p;
    for (int k = 0; k < prompt; ++k) p.push_back(int32_t(1 + (977 * (i + 1) + 131 * k) % (V - 1)));
    s.states.push_back(m.new_state());
    m.draft_head()->enable_draft(*s.states.back());
    const std::vector<float> lg = m.prefill(*s.states.back(), p);
    s.next.push_back(engine::argmax(lg.data(), V));
    s.spec.push_back(std::make_unique<engine::SpecDecoder>(m, depth));
    s.emitted.emplace_back();
  }
  return s;
}

const std::function<bool(int32_t)> kNoStop = [](int32_t) { return false; };
constexpr int64_t kBudget = 1 << 20;

// One cycle of every stream; returns the tokens emitted.
int64_t cycle_alone(Streams& s) {
  int64_t tokens = 0;
  engine::SpecCycle c;
  for (size_t i = 0; i < s.states.size(); ++i) {
    s.spec[i]->cycle(s.states[i], s.next[i], kBudget, kNoStop, c);
    s.emitted[i].insert(s.emitted[i].end(), c.accepted.begin(), c.accepted.end());
    s.emitted[i].push_back(c.bonus);
    s.next[i] = c.bonus;
    tokens += int64_t(c.accepted.size()) + 1;
  }
  return tokens;
}

int64_t cycle_batched(Model& m, Streams& s) {
  std::vector<ModelState*> st;
  std::vector<std::span<const int32_t>> win;
  for (size_t i = 0; i < s.states.size(); ++i) {
    win.push_back(s.spec[i]->draft_window(*s.states[i], s.next[i], kBudget));
    st.push_back(s.states[i].get());
  }
  std::vector<float> rows;
  if (!m.verify_batch(st, win, rows)) throw std::runtime_error("verify_batch: the head cannot capture");
  const size_t V = size_t(m.info().vocab_size);
  int64_t tokens = 0;
  engine::SpecCycle c;
  for (size_t i = 0, r0 = 0; i < s.states.size(); ++i) {
    const size_t n = win[i].size();
    s.spec[i]->finish_captured(s.states[i], std::span<const float>(rows.data() + r0 * V, n * V), 0.0, kBudget,
                               kNoStop, c);
    r0 += n;
    s.emitted[i].insert(s.emitted[i].end(), c.accepted.begin(), c.accepted.end());
    s.emitted[i].push_back(c.bonus);
    s.next[i] = c.bonus;
    tokens += int64_t(c.accepted.size()) + 1;
  }
  return tokens;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s MODEL [--threads T] [--streams 1,4] [--cycles 20] [--depth 3] [--prompt 32]\n",
                 argv[0]);
    return 2;
  }
  LoadOptions lo;
  lo.threads = 2;
  std::string streams = "1,4";
  int cycles = 20, depth = 3, prompt = 32;
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--threads") lo.threads = std::stoi(v);
    else if (k == "--streams") streams = v;
    else if (k == "--cycles") cycles = std::stoi(v);
    else if (k == "--depth") depth = std::stoi(v);
    else if (k == "--prompt") prompt = std::stoi(v);
    else return std::fprintf(stderr, "unknown option %s\n", k.c_str()), 2;
  }
  auto m = load_model(argv[1], lo);
  if (!m->draft_head()) return std::fprintf(stderr, "%s has no draft head\n", argv[1]), 2;
  std::printf("model %s (%s), threads %d, batched_verify %s, greedy depth %d, %d cycles per stream, prompt %d\n",
              argv[1], m->info().family.c_str(), lo.threads, m->info().batched_verify ? "native" : "fallback loop",
              depth, cycles, prompt);
  std::printf("| streams | alone tok/s | batched verify tok/s | ratio | tokens equal |\n|---|---|---|---|---|\n");
  std::stringstream ss(streams);
  for (std::string tok; std::getline(ss, tok, ',');) {
    const int n = std::stoi(tok);
    Streams a = start(*m, n, prompt, depth), b = start(*m, n, prompt, depth);
    double ta = 0, tb = 0;
    int64_t ka = 0, kb = 0;
    for (int c = 0; c < cycles; ++c) {
      // Alternate which mode runs first so drift hits both alike.
      for (int pass = 0; pass < 2; ++pass) {
        const auto t0 = Clock::now();
        if ((pass == 0) == (c % 2 == 0)) {
          ka += cycle_alone(a);
          ta += s_since(t0);
        } else {
          kb += cycle_batched(*m, b);
          tb += s_since(t0);
        }
      }
    }
    const bool equal = a.emitted == b.emitted;
    std::printf("| %d | %.1f | %.1f | %.2fx | %s |\n", n, double(ka) / ta, double(kb) / tb, (double(kb) / tb) / (double(ka) / ta),
                equal ? "yes" : "NO");
  }
  return 0;
}
