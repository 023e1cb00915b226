// Decode speed of DeepSeek V4 (Flash) on CUDA at batch 1, as a fraction of the roofline:
// weight bytes one decode token reads (dense parts + experts_used routed experts per layer +
// HC head + lm_head) over the device copy bandwidth measured in the same run.
// Usage: bench_deepseek_v4_cuda MODEL [prompt_tokens] [decode_tokens] [--profile]
//   defaults: 64 prompt tokens (ids generated), 64 greedy decode tokens.
//   --profile: afterwards 8 more decode tokens from a clone of the state with direct launches
//   and CUDA events around each op; prints milliseconds per op (summed over layers) per token.
// Peer: antirez/ds4 on the same synthetic file, H200: 33.65 tok/s decode at 2048 context, 8.2%
// of the 410 tok/s roofline (bench/results/ds4-peer-h200-2026-12-01).
// The synthetic full-size Flash: ds4-convert --synthetic deepseek_v4_flash OUT.gguf.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "backend/cuda/bandwidth.h"
#include "backend/cuda/check.h"
#include "models/deepseek_v4/cuda/model_cuda.h"

using namespace ds4;
using Clock = std::chrono::steady_clock;

namespace {

double secs(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

int32_t argmax(const std::vector<float>& l) { return int32_t(std::max_element(l.begin(), l.end()) - l.begin()); }

// Continues a clone of the bench's state (same context length) with direct launches.
void profile(deepseek_v4::DeepseekV4CudaModel& m, const ModelState& at, std::vector<float> l, int n) {
  auto s = at.clone();
  m.set_options(deepseek_v4::CudaModelOptions{false, true});
  m.reset_op_times();
  const auto t0 = Clock::now();
  for (int i = 0; i < n; ++i) l = m.decode(*s, argmax(l));
  const double dt = secs(t0, Clock::now());
  std::vector<std::pair<double, std::string>> rows;
  double total = 0;
  for (const auto& [name, ms] : m.op_times()) rows.push_back({ms / n, name}), total += ms / n;
  std::sort(rows.rbegin(), rows.rend());
  std::printf("\nper-op GPU time per decode token (direct launches + events, %d tokens; %.3f ms/token wall):\n", n,
              1e3 * dt / n);
  std::printf("| op (all layers) | ms/token | share |\n|---|---|---|\n");
  for (const auto& [ms, name] : rows) std::printf("| %s | %.3f | %.1f%% |\n", name.c_str(), ms, 100 * ms / total);
  std::printf("| total | %.3f | |\n", total);
  const auto& t = m.op_times();
  auto ms = [&](const char* k) { return t.count(k) ? t.at(k) / n : 0.0; };
  const double ex_ms = ms("experts_gate_up") + ms("experts_down");
  if (ex_ms > 0)
    std::printf("routed experts: %.3f GB per token in %.3f ms -> %.0f GB/s (gate|up %.3f ms, down %.3f ms)\n",
                double(m.decode_bytes_per_token().experts) / 1e9, ex_ms,
                double(m.decode_bytes_per_token().experts) / 1e6 / ex_ms, ms("experts_gate_up"), ms("experts_down"));
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> pos;
  bool prof = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--profile") == 0) prof = true;
    else pos.push_back(argv[i]);
  }
  if (pos.empty()) {
    std::fprintf(stderr, "usage: bench_deepseek_v4_cuda MODEL [prompt_tokens] [decode_tokens] [--profile]\n");
    return 2;
  }
  const std::string path = pos[0];
  const int np = pos.size() > 1 ? std::stoi(pos[1]) : 64;
  const int n = pos.size() > 2 ? std::stoi(pos[2]) : 64;
  try {
    cudaStream_t st;
    DS4_CUDA_CHECK(cudaStreamCreate(&st));
    const cuda::Bandwidth bw = cuda::measure_bandwidth(size_t(1) << 30, 20, st);
    DS4_CUDA_CHECK(cudaStreamDestroy(st));
    std::printf("copy bandwidth %.0f GB/s (read+write), memcpy %.0f GB/s, read-only %.0f GB/s (1 GiB buffers)\n",
                bw.copy_gbps, bw.memcpy_gbps, bw.read_gbps);
    LoadOptions o;
    o.max_context = np + n + 64;
    const auto t0 = Clock::now();
    deepseek_v4::DeepseekV4CudaModel m(open_tensor_source(path), o);
    const double load_s = secs(t0, Clock::now());
    const int64_t V = m.info().vocab_size;
    std::vector<int32_t> prompt;
    for (int i = 0; i < np; ++i) prompt.push_back(int32_t((int64_t(i) * 7919 + 13) % V));
    {  // warm-up: graph capture of a state, caches
      auto w = m.new_state();
      auto l = m.prefill(*w, std::vector<int32_t>(prompt.begin(), prompt.begin() + std::min(np, 4)));
      for (int i = 0; i < 4; ++i) l = m.decode(*w, argmax(l));
    }
    auto s = m.new_state();
    const auto t1 = Clock::now();
    auto l = m.prefill(*s, prompt);
    const auto t2 = Clock::now();
    const auto at_prompt = s->clone();
    const std::vector<float> l_prompt = l;
    for (int i = 0; i < n; ++i) l = m.decode(*s, argmax(l));
    const auto t3 = Clock::now();
    const double prefill_tps = np / secs(t1, t2), decode_tps = n / secs(t2, t3);
    // The same decode from a clone of the prompt state on one stream (one token first: the
    // clone captures its own graph).
    m.set_options(deepseek_v4::CudaModelOptions{true, false, true, false});
    double streams_tps = 0;
    {
      auto c = at_prompt->clone();
      auto lc = m.decode(*c, argmax(l_prompt));
      const auto t4 = Clock::now();
      for (int i = 0; i < n; ++i) lc = m.decode(*c, argmax(lc));
      streams_tps = n / secs(t4, Clock::now());
    }
    m.set_options(deepseek_v4::CudaModelOptions{});
    const auto db = m.decode_bytes_per_token();
    const double bytes = double(db.total());
    const double roof = bw.copy_gbps * 1e9 / bytes;
    std::printf("model %s: %.2f GB of weights on the device (loaded in %.1f s), max_context %lld\n", path.c_str(),
                double(m.weight_bytes()) / 1e9, load_s, (long long)m.info().max_context);
    std::printf("prompt %d tokens (token-by-token prefill: %.1f tok/s), greedy decode %d tokens at batch 1 (CUDA graph, side stream)\n",
                np, prefill_tps, n);
    std::printf("weights read per decode token: %.3f GB = dense layer parts %.3f + %lld routed experts x %lld layers "
                "%.3f + HC head and lm_head %.3f\n",
                bytes / 1e9, double(db.dense) / 1e9, (long long)m.config().experts_used, (long long)m.config().layers,
                double(db.experts) / 1e9, double(db.head) / 1e9);
    std::printf("decode: %.2f tok/s, %.3f ms/token -> %.0f GB/s of weights effective\n", decode_tps,
                1e3 / decode_tps, bytes * decode_tps / 1e9);
    std::printf("roofline (copy bandwidth / bytes per token) %.1f tok/s; fraction %.1f%%\n", roof,
                100 * decode_tps / roof);
    std::printf("on one stream (CudaModelOptions::streams off): %.2f tok/s, %.3f ms/token, %.1f%% of the roofline\n",
                streams_tps, 1e3 / streams_tps, 100 * streams_tps / roof);
    std::printf("vs antirez/ds4 on the synthetic Flash, H200, 2048 context: 33.65 tok/s (8.2%% of its roofline): "
                "ratio %.2fx\n", decode_tps / 33.65);
    if (prof) profile(m, *s, l, 8);
  } catch (const std::exception& e) {
    std::printf("FATAL %s\n", e.what());
    return 1;
  }
  return 0;
}
