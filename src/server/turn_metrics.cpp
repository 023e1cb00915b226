#include "server/turn_metrics.h"

#include <algorithm>
#include <cstdio>

namespace ds4::server {

Histogram::Histogram(std::string name, std::string help, std::vector<double> bounds)
    : name_(std::move(name)), help_(std::move(help)), bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double v) {
  const size_t i = size_t(std::lower_bound(bounds_.begin(), bounds_.end(), v) - bounds_.begin());  // le: v <= bound
  counts_[i]++;
  sum_ += v;
  n_++;
}

std::string Histogram::text() const {
  std::string out = "# HELP " + name_ + " " + help_ + "\n# TYPE " + name_ + " histogram\n";
  char line[200];
  uint64_t cum = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cum += counts_[i];
    std::snprintf(line, sizeof line, "%s_bucket{le=\"%g\"} %llu\n", name_.c_str(), bounds_[i], (unsigned long long)cum);
    out += line;
  }
  std::snprintf(line, sizeof line, "%s_bucket{le=\"+Inf\"} %llu\n%s_sum %.6f\n%s_count %llu\n", name_.c_str(),
                (unsigned long long)n_, name_.c_str(), sum_, name_.c_str(), (unsigned long long)n_);
  return out + line;
}

void TurnMetrics::observe(const engine::Usage& u) {
  std::lock_guard lk(mu_);
  queue_.observe(u.queue_s);
  // A turn that produced no token has no TTFT or per-token time (cancelled before, failed).
  if (u.completion_tokens > 0) ttft_.observe(u.ttft_s);
  if (u.completion_tokens > 1 && u.decode_s > 0) {
    tpot_.observe(u.decode_s / double(u.completion_tokens - 1));
    stream_rate_.observe(double(u.completion_tokens - 1) / u.decode_s);
  }
  const int64_t computed = u.prompt_tokens - u.cached_tokens;
  if (computed > 0 && u.prefill_s > 0) prefill_.observe(double(computed) / u.prefill_s);
  drafted_ += uint64_t(std::max<int64_t>(0, u.spec_drafted));
  accepted_ += uint64_t(std::max<int64_t>(0, u.spec_accepted));
  bonus_ += uint64_t(std::max<int64_t>(0, u.spec_bonus));
}

std::string TurnMetrics::text(const std::string& family) const {
  std::lock_guard lk(mu_);
  std::string out = ttft_.text() + tpot_.text() + stream_rate_.text() + prefill_.text() + queue_.text();
  const std::string label = "{family=\"" + family + "\"}";
  auto counter = [&](const char* name, const char* help, uint64_t v) {
    out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " counter\n" + name + label + " " +
           std::to_string(v) + "\n";
  };
  counter("ds4_speculative_drafted_tokens_total", "Draft tokens proposed by the draft head.", drafted_);
  counter("ds4_speculative_accepted_tokens_total", "Draft tokens the target accepted.", accepted_);
  counter("ds4_speculative_bonus_tokens_total", "Extra target tokens gained by verify passes.", bonus_);
  return out;
}

TurnMetrics& turn_metrics() {
  static TurnMetrics m;
  return m;
}

}  // namespace ds4::server
