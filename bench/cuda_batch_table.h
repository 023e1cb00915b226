#pragma once
// Continuous batching on a CUDA model (issue #24; DeepSeek V4, GLM 5.x, Qwen3.8 Next: any model
// with decode_batch, chunk_bytes_ratio and set_options): N streams decoding at once
// through Model::decode_batch (one forward per step, each weight read once for the N rows),
// against the same N streams stepped one after another (the unbatched path). Every stream is
// a clone of the prompt state fed its own pseudo-random tokens (distinct rows, so the routed
// experts' union grows with N as in real traffic). Per N: the steps' wall times (each stream
// gets one token per step, so a step's time is every stream's time per output token), the
// aggregate tok/s, and the weight bytes one step reads (dense + head once, routed experts as
// the expected union of N rows' top-k sets: chunk_bytes_ratio) per second against the copy
// bandwidth measured in the same run. Bench only, no checks: test_*_batch_cuda check the rows.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cuda_kernel_trace.h"
#include "cuda_op_table.h"
#include "models/model.h"

namespace ds4::bench {

// bytes: the weight bytes one decode token reads (the model's own count). profiling (optional):
// switches the model's per-op timing on / off (direct launches + events); when set, one more
// step per stream count runs with it on and its per-op table follows the row (what a step of N
// rows spends beyond the weights it reads).
template <class M>
void batch_table(M& m, const ModelState& at, const std::vector<int>& streams, int steps, double single_tps,
                 double copy_gbps, int batch_rows, double bytes,
                 const std::function<void(bool)>& profiling = nullptr) {
  using Clock = std::chrono::steady_clock;
  auto secs = [](Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); };
  const int64_t V = m.info().vocab_size;
  auto token = [&](int64_t stream, int64_t step) { return int32_t((stream * 7919 + step * 104729 + 17) % V); };
  std::printf("\ncontinuous batching (decode_batch, batch_rows %d: sequences per forward), %d steps per row after 2 "
              "warm-up steps (graph capture), from position %lld; single-stream decode above: %.2f tok/s\n",
              batch_rows, steps, (long long)at.position(), single_tps);
  std::printf("| streams | step ms p50 | step ms max | per-stream TPOT ms | aggregate tok/s | vs 1 stream | unbatched "
              "aggregate tok/s (streams one after another) | batched / unbatched | weights GB/s (expected union) | of "
              "copy bw | decode_batch_candidates step ms p50 (greedy, the engine's path) |\n"
              "|---|---|---|---|---|---|---|---|---|---|---|\n");
  double one = 0;
  for (int n : streams) {
    std::vector<std::unique_ptr<ModelState>> st;
    std::vector<ModelState*> ptr;
    for (int i = 0; i < n; ++i) st.push_back(at.clone()), ptr.push_back(st.back().get());
    std::vector<float> rows;
    std::vector<int32_t> toks(static_cast<size_t>(n), 0);
    int64_t k = 0;
    auto step = [&] {
      for (int i = 0; i < n; ++i) toks[size_t(i)] = token(i, k);
      ++k;
      m.decode_batch(ptr, toks, rows);
    };
    step(), step();
    std::vector<double> ms;
    const auto t0 = Clock::now();
    for (int s = 0; s < steps; ++s) {
      const auto a = Clock::now();
      step();
      ms.push_back(1e3 * secs(a, Clock::now()));
    }
    const double total = secs(t0, Clock::now()), agg = double(n) * steps / total;
    if (n == 1 || one == 0) one = agg / n;
    // The unbatched path: the same streams, one forward each per round (rounds kept short),
    // after one untimed round (each state captures its own decode-step graph on first use).
    double unbatched = 0;
    if (n <= 16) {
      const int rounds = std::max(2, 32 / n);
      std::vector<float> l;
      for (int i = 0; i < n; ++i) {
        const int32_t t = token(i, k);
        m.forward(*ptr[size_t(i)], std::span<const int32_t>(&t, 1), Logits::kLast, l);
      }
      ++k;
      const auto u0 = Clock::now();
      for (int r = 0; r < rounds; ++r, ++k)
        for (int i = 0; i < n; ++i) {
          const int32_t t = token(i, k);
          m.forward(*ptr[size_t(i)], std::span<const int32_t>(&t, 1), Logits::kLast, l);
        }
      unbatched = double(n) * rounds / secs(u0, Clock::now());
    }
    // The engine's path: the same steps through decode_batch_candidates, greedy (k = 1, the
    // draw decided by the candidates: no row comes back).
    std::vector<double> cms;
    {
      const std::vector<CandidateRequest> reqs(static_cast<size_t>(n), CandidateRequest{1, 0.0});
      std::vector<SampleCandidates> cands;
      auto cstep = [&] {
        for (int i = 0; i < n; ++i) toks[size_t(i)] = token(i, k);
        ++k;
        m.decode_batch_candidates(ptr, toks, reqs, cands, rows, [](size_t, const SampleCandidates&) { return false; });
      };
      cstep();  // its own graphs (their head ends in the candidates)
      for (int s = 0; s < steps; ++s) {
        const auto a = Clock::now();
        cstep();
        cms.push_back(1e3 * secs(a, Clock::now()));
      }
      std::sort(cms.begin(), cms.end());
    }
    std::sort(ms.begin(), ms.end());
    const double p50 = ms[ms.size() / 2], mx = ms.back();
    // forwards of up to batch_rows rows: each reads the weights once for its rows
    const int full = n / batch_rows, rest = n % batch_rows;
    const double step_bytes = (full * m.chunk_bytes_ratio(batch_rows) + (rest ? m.chunk_bytes_ratio(rest) : 0)) * bytes;
    const double gbps = step_bytes * (double(steps) / total) / 1e9;
    char ub[64] = "-", ratio[32] = "-";
    if (unbatched > 0) std::snprintf(ub, sizeof ub, "%.1f", unbatched), std::snprintf(ratio, sizeof ratio, "%.2fx", agg / unbatched);
    std::printf("| %d | %.2f | %.2f | %.2f | %.1f | %.2fx | %s | %s | %.0f | %.1f%% | %.2f |\n", n, p50, mx,
                1e3 * total / steps, agg, agg / one, ub, ratio, gbps, 100 * gbps / copy_gbps, cms[cms.size() / 2]);
    if (n == 1 && single_tps > 0)
      std::printf("|  | (1 stream through decode_batch = the single-sequence step: %.1f%% of the decode above) |"
                  "  |  |  |  |  |  |  |  |  |\n", 100 * agg / single_tps);
    std::fflush(stdout);
    if (KernelTrace::get()) {  // DS4_KERNEL_TRACE: the same steps' kernels as they run in the graphs
      const int traced = kernel_trace_steps();
      const TraceWindow trace("a decode_batch step of " + std::to_string(n) + " streams (graphs)", traced);
      for (int s = 0; s < traced; ++s) step();
    }
    if (profiling) {
      profiling(true);
      m.reset_op_times();
      const auto a = Clock::now();
      step();
      const double wall = 1e3 * secs(a, Clock::now());
      profiling(false);
      std::printf("\nper-op GPU time of one decode_batch step of %d streams (direct launches + events, one stream; "
                  "%.3f ms wall):\n", n, wall);
      print_op_table(m.op_times(), 1, "step");
      std::printf("\n| streams | step ms p50 | step ms max | per-stream TPOT ms | aggregate tok/s | vs 1 stream | "
                  "unbatched aggregate tok/s | batched / unbatched | weights GB/s | of copy bw | candidates step ms |\n"
                  "|---|---|---|---|---|---|---|---|---|---|---|\n");
    }
  }
}

// The command-line part the benches share: --batch N,N (stream counts), --batch-rows N,N (one
// table per CudaModelOptions::batch_rows value), --batch-steps S, --batch-profile, --seq-ab.
struct BatchArgs {
  std::vector<int> streams, rows;
  int steps = 16;
  bool profile = false;  // --batch-profile: a per-op table of one step per stream count
  bool seq_ab = false;   // --seq-ab: the tables again with CudaModelOptions::seq_launches off
};

// Reads one of the flags above at argv[i] (and its value); false when argv[i] is none of them.
inline bool parse_batch_flag(int argc, char** argv, int& i, BatchArgs& b) {
  auto list = [](const std::string& l, std::vector<int>& out) {
    size_t at = 0;
    while (at < l.size()) {
      const size_t comma = l.find(',', at);
      out.push_back(std::stoi(l.substr(at, comma == std::string::npos ? std::string::npos : comma - at)));
      at = comma == std::string::npos ? l.size() : comma + 1;
    }
  };
  const std::string a = argv[i];
  if (a == "--batch-profile") return b.profile = true;
  if (a == "--seq-ab") return b.seq_ab = true;
  if (i + 1 >= argc) return false;
  if (a == "--batch") list(argv[++i], b.streams);
  else if (a == "--batch-rows") list(argv[++i], b.rows);
  else if (a == "--batch-steps") b.steps = std::stoi(argv[++i]);
  else return false;
  return true;
}

// One batch_table per batch_rows value (default: the model's current option), restoring the
// model's options afterwards. Options must have a batch_rows member.
// profiling: as batch_table's, used with --batch-profile.
template <class M>
void batch_tables(M& m, const ModelState& at, const BatchArgs& b, double single_tps, double copy_gbps, double bytes,
                  const std::function<void(bool)>& profiling = nullptr) {
  const auto keep = m.options();
  std::vector<int> rows = b.rows;
  if (rows.empty()) rows.push_back(keep.batch_rows);
  for (int br : rows) {
    auto o = keep;
    o.batch_rows = br;
    m.set_options(o);
    batch_table(m, at, b.streams, b.steps, single_tps, copy_gbps, br, bytes, b.profile ? profiling : nullptr);
  }
  m.set_options(keep);
}

}  // namespace ds4::bench
