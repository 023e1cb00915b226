#pragma once
// Per-turn latency histograms and speculative counters for /metrics (Prometheus text):
// TTFT, time per output token, prefill tok/s, queue wait; drafted / accepted / bonus tokens.
// Fed from the finished turn's usage where every protocol's events pass (api_common pump and
// wait_events), so no handler has to remember it. One per process: one model is served.
#include <array>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "engine/request.h"

namespace ds4::server {

class Histogram {
 public:
  Histogram(std::string name, std::string help, std::vector<double> bounds);
  void observe(double v);  // caller holds the owner's lock
  std::string text() const;

 private:
  std::string name_, help_;
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bucket (not cumulative); last = +Inf
  double sum_ = 0;
  uint64_t n_ = 0;
};

class TurnMetrics {
 public:
  void observe(const engine::Usage& u);  // one finished turn (kDone)
  // `family` labels the speculative counters (the model this server runs).
  std::string text(const std::string& family) const;

 private:
  mutable std::mutex mu_;
  Histogram ttft_{"ds4_ttft_seconds", "Time to first token, submit to first sampled token.",
                  {0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}};
  Histogram tpot_{"ds4_time_per_output_token_seconds", "Decode time per output token after the first.",
                  {0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1}};
  Histogram prefill_{"ds4_prefill_tokens_per_second", "Computed prompt tokens per prefill second, per turn.",
                     {10, 50, 100, 250, 500, 1000, 2500, 5000, 10000}};
  Histogram stream_rate_{"ds4_stream_decode_tokens_per_second",
                         "Output tokens per decode second of one stream (after its first token), per turn.",
                         {1, 5, 10, 25, 50, 100, 250, 500, 1000, 2500}};
  Histogram queue_{"ds4_queue_wait_seconds", "Time from submit until the turn's prefill began.",
                   {0.001, 0.01, 0.05, 0.1, 0.5, 1, 5, 30}};
  uint64_t drafted_ = 0, accepted_ = 0, bonus_ = 0;
};

TurnMetrics& turn_metrics();

}  // namespace ds4::server
