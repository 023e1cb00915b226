#include "core/canary_monitor.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <exception>

#include "core/error.h"

namespace ds4 {

double percentile_nearest_rank(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  // Nearest rank: the smallest value with at least p% of the samples at or below it.
  size_t rank = size_t(std::ceil(p / 100.0 * double(values.size())));
  rank = std::clamp<size_t>(rank, 1, values.size());
  std::nth_element(values.begin(), values.begin() + ptrdiff_t(rank - 1), values.end());
  return values[rank - 1];
}

CanaryStats canary_stats(const std::vector<double>& latencies_ms, int64_t stalls) {
  CanaryStats s;
  s.samples = int64_t(latencies_ms.size());
  s.stalls = stalls;
  if (latencies_ms.empty()) return s;
  s.p50_ms = percentile_nearest_rank(latencies_ms, 50);
  s.p95_ms = percentile_nearest_rank(latencies_ms, 95);
  s.p99_ms = percentile_nearest_rank(latencies_ms, 99);
  s.max_ms = *std::max_element(latencies_ms.begin(), latencies_ms.end());
  return s;
}

CanaryMonitor::CanaryMonitor(std::unique_ptr<CanaryProbe> probe, Options o) : probe_(std::move(probe)), o_(std::move(o)) {
  if (!probe_) throw Error("CanaryMonitor: no probe");
  if (o_.capacity == 0) throw InputError("CanaryMonitor: capacity must be > 0");
  if (!(o_.period_s > 0) || !(o_.stall_s > 0)) throw InputError("CanaryMonitor: period_s and stall_s must be > 0");
  ring_.resize(o_.capacity);
}

CanaryMonitor::~CanaryMonitor() { stop(); }

double CanaryMonitor::now() const {
  if (o_.clock) return o_.clock();
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void CanaryMonitor::record(double latency_ms) {
  ring_[next_sample_ % ring_.size()] = latency_ms;
  ++next_sample_;
  totals_.count++;
  totals_.sum_ms += latency_ms;
  for (size_t i = 0; i < kCanaryBuckets; ++i)
    if (latency_ms <= kCanaryBucketsMs[i]) totals_.le[i]++;
}

void CanaryMonitor::tick() {
  // The probe is only touched from here (one thread), outside the lock: done() may spend
  // a driver call and snapshot() readers must not wait on it.
  std::unique_lock lk(mu_);
  if (failed_) return;
  const bool pending = pending_;
  const double launched = launched_at_;
  const bool due = !launched_once_ || now() - launched >= o_.period_s;
  lk.unlock();
  try {
    if (pending) {
      const bool done = probe_->done();
      const double t = now();
      lk.lock();
      if (done) {
        record((t - launched) * 1e3);
        pending_ = false;
        pending_stalled_ = false;
      } else if (!pending_stalled_ && t - launched > o_.stall_s) {
        pending_stalled_ = true;  // counted once; its latency is recorded when it completes
        totals_.stalls++;
      }
      return;
    }
    if (!due || !active_.load()) return;
    const double t = now();
    probe_->launch();
    lk.lock();
    pending_ = true;
    launched_at_ = t;
    launched_once_ = true;
  } catch (const std::exception& e) {
    if (!lk.owns_lock()) lk.lock();
    failed_ = true;
    std::fprintf(stderr, "gpu canary: probe failed, canary off: %s\n", e.what());
  }
}

void CanaryMonitor::loop() {
  std::unique_lock lk(run_mu_);
  while (running_) {
    lk.unlock();
    tick();
    bool pending;
    {
      std::lock_guard g(mu_);
      pending = pending_;
    }
    lk.lock();
    // Poll a pending probe every 200 us (the latency resolution); otherwise sleep to the
    // next launch. A stop() wakes the wait.
    auto wait = pending ? std::chrono::microseconds(200)
                        : std::chrono::microseconds(int64_t(o_.period_s * 1e6));
    run_cv_.wait_for(lk, wait, [&] { return !running_; });
  }
}

void CanaryMonitor::start() {
  std::lock_guard lk(run_mu_);
  if (running_) return;
  running_ = true;
  thread_ = std::thread([this] { loop(); });
}

void CanaryMonitor::stop() {
  {
    std::lock_guard lk(run_mu_);
    if (!running_) return;
    running_ = false;
  }
  run_cv_.notify_all();
  thread_.join();
}

CanaryMonitor::Mark CanaryMonitor::mark() const {
  std::lock_guard lk(mu_);
  return {next_sample_, totals_.stalls};
}

CanaryStats CanaryMonitor::snapshot(Mark from) const {
  std::lock_guard lk(mu_);
  const uint64_t kept_from = next_sample_ > ring_.size() ? next_sample_ - ring_.size() : 0;
  std::vector<double> v;
  for (uint64_t n = std::max(from.sample, kept_from); n < next_sample_; ++n) v.push_back(ring_[n % ring_.size()]);
  return canary_stats(v, int64_t(totals_.stalls - std::min(from.stalls, totals_.stalls)));
}

bool CanaryMonitor::stalled_since(Mark from) const {
  std::lock_guard lk(mu_);
  return totals_.stalls > from.stalls;
}

CanaryTotals CanaryMonitor::totals() const {
  std::lock_guard lk(mu_);
  return totals_;
}

}  // namespace ds4
