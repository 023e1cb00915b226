#include "engine/spec_cost.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace ds4::engine {

double spec_tokens_per_cycle(double a, int depth) {
  a = std::clamp(a, 0.0, 1.0);
  double e = 0, p = 1;
  for (int i = 0; i <= depth; ++i, p *= a) e += p;
  return e;
}

SpecCostDecision decide_speculation(const SpecCostInputs& in, double margin) {
  SpecCostDecision d;
  d.cycle_s = in.draft_s + in.verify_s + in.commit_s;
  d.tokens_per_cycle = spec_tokens_per_cycle(in.acceptance, in.depth);
  char buf[256];
  if (!(in.decode_s > 0) || !(d.cycle_s > 0) || in.depth < 1) {
    d.reason = "not measured (no draft head, or speculation off)";
    return d;
  }
  const double need = d.cycle_s / in.decode_s;  // tokens a cycle must emit to break even
  d.speedup = d.tokens_per_cycle / need;
  d.enabled = d.speedup >= margin;
  if (spec_tokens_per_cycle(1.0, in.depth) < need) {
    d.break_even_acceptance = need / double(in.depth + 1);  // > 1: unreachable
  } else {
    double lo = 0, hi = 1;  // E is increasing in a
    for (int i = 0; i < 60; ++i) {
      const double mid = (lo + hi) / 2;
      (spec_tokens_per_cycle(mid, in.depth) < need ? lo : hi) = mid;
    }
    d.break_even_acceptance = hi;
  }
  std::snprintf(buf, sizeof buf,
                "%s: expected %.2fx AR (%.2f tokens per cycle at acceptance %.2f; cycle %.2f ms = %.2f decode steps; "
                "break-even acceptance %.2f)",
                d.enabled ? "on" : "off", d.speedup, d.tokens_per_cycle, in.acceptance, d.cycle_s * 1e3, need,
                d.break_even_acceptance);
  d.reason = buf;
  return d;
}

namespace {
int bucket_of(int64_t rows) {
  int b = 0;
  while (b + 1 < RowCostCurve::kBuckets && (int64_t(1) << (b + 1)) <= rows) ++b;
  return b;
}
}  // namespace

void RowCostCurve::observe(int64_t rows, double seconds) {
  if (rows < 1 || !(seconds > 0) || !std::isfinite(seconds)) return;
  Point& p = b_[size_t(bucket_of(rows))];
  // The first few calls are plain means, later ones move the point by 1/16 (load changes).
  const double w = 1.0 / double(std::min<int64_t>(++p.count, 16));
  p.rows += w * (double(rows) - p.rows);
  p.seconds += w * (seconds - p.seconds);
}

int RowCostCurve::points() const {
  int n = 0;
  for (const Point& p : b_) n += p.count > 0;
  return n;
}

std::optional<double> RowCostCurve::seconds(int64_t rows) const {
  const Point *lo = nullptr, *hi = nullptr, *prev = nullptr;
  const double r = double(rows);
  for (const Point& p : b_) {
    if (p.count == 0) continue;
    if (p.rows <= r) {
      prev = lo;
      lo = &p;
    } else if (!hi) {
      hi = &p;
    }
  }
  if (!lo && !hi) return std::nullopt;
  if (lo && hi) return lo->seconds + (hi->seconds - lo->seconds) * (r - lo->rows) / (hi->rows - lo->rows);
  if (!lo) return hi->seconds * r / hi->rows;  // below every point: proportional to the rows
  if (!prev || lo->rows == r) return lo->seconds;  // one point at or below: hold it
  // Past the last point: its slope from the one before it, never below the last point.
  const double slope = std::max(0.0, (lo->seconds - prev->seconds) / (lo->rows - prev->rows));
  return lo->seconds + slope * (r - lo->rows);
}

SpecCostDecision decide_speculation_at(const SpecCostInputs& in, const RowCostCurve& curve, int64_t streams,
                                       BatchedForwards batched, double margin) {
  if (streams <= 1 || in.depth < 1 || !(batched.decode || batched.verify)) return decide_speculation(in, margin);
  SpecCostInputs per_stream = in;
  if (batched.decode) {
    const auto t = curve.seconds(streams);
    if (!t) return decide_speculation(in, margin);
    per_stream.decode_s = *t / double(streams);
  }
  if (batched.verify) {
    const auto t = curve.seconds(streams * (in.depth + 1));
    if (!t) return decide_speculation(in, margin);
    per_stream.verify_s = *t / double(streams);
  }
  SpecCostDecision d = decide_speculation(per_stream, margin);
  d.reason += " at " + std::to_string(streams) + " streams";
  if (!batched.verify) d.reason += " (verifies one by one)";
  if (!batched.decode) d.reason += " (AR steps one by one)";
  return d;
}

void SpecCostModel::set_warmup(int depth, double decode_s, double verify_s, double draft_s) {
  std::lock_guard lk(mu_);
  in_.depth = depth;
  in_.decode_s = decode_s;
  in_.verify_s = verify_s;
  in_.draft_s = draft_s;
  in_.acceptance = kPriorAcceptance;
  in_.source = "warmup";
  measured_ = decode_s > 0 && verify_s > 0;
  curve_.observe(1, decode_s);
  curve_.observe(depth + 1, verify_s);
}

void SpecCostModel::observe_rows(int64_t rows, double seconds) {
  std::lock_guard lk(mu_);
  curve_.observe(rows, seconds);
}

SpecCostDecision SpecCostModel::decision_at(int64_t streams, BatchedForwards batched) const {
  std::lock_guard lk(mu_);
  return decide_speculation_at(in_, curve_, streams, batched);
}

void SpecCostModel::observe(int64_t cycles, int64_t drafted, int64_t accepted, double draft_s, double verify_s,
                            double commit_s) {
  if (cycles <= 0 || drafted <= 0) return;
  std::lock_guard lk(mu_);
  in_.observed_drafted += drafted;
  in_.observed_accepted += accepted;
  in_.acceptance = (double(in_.observed_accepted) + kPriorAcceptance * kPriorDrafts) /
                   (double(in_.observed_drafted) + kPriorDrafts);
  // Per-cycle costs of the live turn, weighted by its share of recent cycles.
  const double w = std::min(1.0, double(cycles) / 64.0);
  const double n = double(cycles);
  in_.draft_s += w * (draft_s / n - in_.draft_s);
  in_.verify_s += w * (verify_s / n - in_.verify_s);
  in_.commit_s += w * (commit_s / n - in_.commit_s);
  in_.source = "warmup+live";
}

void SpecCostModel::observe_decode(double step_s) {
  if (!(step_s > 0)) return;
  std::lock_guard lk(mu_);
  curve_.observe(1, step_s);  // one stream's step is also the curve's 1-row point
  if (!measured_) return;
  in_.decode_s += (step_s - in_.decode_s) / 64.0;
  in_.source = "warmup+live";
}

bool SpecCostModel::measured() const {
  std::lock_guard lk(mu_);
  return measured_;
}

SpecCostInputs SpecCostModel::inputs() const {
  std::lock_guard lk(mu_);
  return in_;
}

}  // namespace ds4::engine
