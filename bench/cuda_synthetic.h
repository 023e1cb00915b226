#pragma once
// Shared by the CUDA benches' synthetic full-size runs (issue #10): prefill to growing
// context frontiers on one state, and greedy decode at batch 1 at each frontier, each as a
// fraction of the roofline = (bytes that must be read per token) / (device bandwidth measured
// in the same run). The bytes per token come from the model's bench (Bytes callback), so each
// states its own counting.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "backend/cuda/bandwidth.h"
#include "cuda_common.h"
#include "models/model.h"

namespace ds4::bench {

// Bytes one token must move: a decode token at context `pos`, or a prefill token in a chunk
// (amortized over the chunk's rows) at context `pos`.
struct TokenBytes {
  std::function<double(int64_t pos)> decode, prefill;
};

// The roofline's bandwidth, measured in the same run (1 GiB buffers, 20 reps) and printed.
inline cuda::Bandwidth measure_printed_bandwidth() {
  cudaStream_t stream;
  cudaStreamCreate(&stream);
  const auto bw = cuda::measure_bandwidth(size_t(1) << 30, 20, stream);
  cudaStreamDestroy(stream);
  std::printf("device bandwidth (same run): copy %.0f GB/s, memcpy %.0f GB/s, read %.0f GB/s\n", bw.copy_gbps,
              bw.memcpy_gbps, bw.read_gbps);
  return bw;
}

inline std::vector<int64_t> parse_contexts(const std::string& s) {
  std::vector<int64_t> v;
  size_t at = 0;
  while (at < s.size()) {
    const size_t comma = s.find(',', at);
    v.push_back(std::stoll(s.substr(at, comma == std::string::npos ? std::string::npos : comma - at)));
    at = comma == std::string::npos ? s.size() : comma + 1;
  }
  return v;
}

// Prefills token ids (a fixed pseudo-random sequence) up to each frontier in `contexts`
// (ascending), then decodes n_decode greedy tokens there twice, each after an untimed step: through
// forward_candidates (the engine's path) and with full logit rows; prints one table row per frontier
// (2 n_decode + 2 tokens a frontier: size max_context for them).
// The prefill rows: tok/s of that segment (from the previous frontier) and cumulative from 0.
// at_frontier (optional): called after each frontier's decode with the state and its last
// logits (benches print a per-op profile there, on a clone), right after that frontier's row.
using FrontierHook = std::function<void(int64_t ctx, const ModelState& s, const std::vector<float>& logits)>;
inline void context_table(Model& m, const std::vector<int64_t>& contexts, int n_decode, const TokenBytes& bytes,
                          const cuda::Bandwidth& bw, const FrontierHook& at_frontier = {}) {
  using Clock = std::chrono::steady_clock;
  const int64_t V = m.info().vocab_size;
  auto tok = [&](int64_t i) { return int32_t((i * 7919 + 13) % V); };
  {  // warm-up on a throw-away state: first-use costs outside the timed state (its own graphs still get captured)
    auto w = m.new_state();
    std::vector<int32_t> p;
    for (int64_t i = 0; i < 40; ++i) p.push_back(tok(i));
    m.prefill(*w, p);
    for (int i = 0; i < 3; ++i) m.decode(*w, tok(i));
  }
  auto s = m.new_state();
  std::printf(
      "| context | prefill tok/s (segment) | prefill tok/s (from 0) | prefill bytes/token MB | prefill of bw | decode "
      "tok/s | decode ms | decode bytes/token MB | decode of bw | decode tok/s, engine path (top 1 on the device) "
      "|\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|\n");
  std::fflush(stdout);  // a run cut by a timeout keeps the rows it printed
  int64_t pos = 0;
  double prefill_s = 0;
  int64_t prefilled = 0;
  for (const int64_t ctx : contexts) {
    if (ctx <= pos) continue;
    std::vector<int32_t> seg;
    for (int64_t i = pos; i < ctx; ++i) seg.push_back(tok(i));
    double pbytes = 0;  // mean bytes per prefill token over the segment
    for (int64_t i = pos; i < ctx; i += 256) pbytes += bytes.prefill(i) * double(std::min<int64_t>(256, ctx - i));
    pbytes /= double(ctx - pos);
    auto t0 = Clock::now();
    auto l = m.prefill(*s, seg);
    const double dt = std::chrono::duration<double>(Clock::now() - t0).count();
    prefill_s += dt;
    prefilled += int64_t(seg.size());
    const double seg_tps = double(seg.size()) / dt;
    pos = ctx;
    auto argmax_l = [&] { return argmax_row(l); };
    // One untimed step first: the state captures its decode graph on its first step (session 37:
    // ~8.5 ms on the H100, 3-5 % of a 32-token timing before), so the rate is the steady state's.
    l = m.decode(*s, argmax_l());
    const double dbytes = bytes.decode(s->position() + n_decode / 2);
    // The engine's path first, then the full-row decode (logits copied back, argmax on the host),
    // which leaves `l` the state's last row for at_frontier.
    const EnginePathRun eng = engine_path_decode(m, *s, argmax_l(), n_decode);
    if (eng.ok) l = m.decode(*s, eng.next);  // (untimed: back to full rows)
    t0 = Clock::now();
    for (int i = 0; i < n_decode; ++i) l = m.decode(*s, argmax_l());
    const double dec_tps = double(n_decode) / std::chrono::duration<double>(Clock::now() - t0).count();
    pos = s->position();
    bool finite = true;
    for (float x : l) finite = finite && std::isfinite(x);
    std::printf("| %lld | %.0f | %.0f | %.1f | %.3f | %.2f | %.3f | %.1f | %.3f | %.2f |%s\n", (long long)ctx, seg_tps,
                double(prefilled) / prefill_s, pbytes / 1e6, pbytes * seg_tps / 1e9 / bw.copy_gbps, dec_tps,
                1e3 / dec_tps, dbytes / 1e6, dbytes * dec_tps / 1e9 / bw.copy_gbps, eng.tps,
                finite ? "" : " NON-FINITE LOGITS");
    std::fflush(stdout);
    if (at_frontier) at_frontier(ctx, *s, l);
  }
  std::printf("(of bw: bytes/token x tok/s over the copy bandwidth of this run, %.0f GB/s; the read-only probe gave %.0f "
              "GB/s)\n", bw.copy_gbps, bw.read_gbps);
}

}  // namespace ds4::bench
