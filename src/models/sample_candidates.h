#pragma once
// What a sampler needs of one logits row when it does not need all of it: the row's argmax
// and its top-k finite logits. A CUDA model computes this on the device
// (backend/cuda/sample_reduce.h) and copies back only these few bytes per step; the host
// reference below serves the CPU models and is what the GPU op is tested against.
// engine/sampler.h Sampler::sample_from() finishes a draw on it, bit for bit as on the row.
#include <cmath>
#include <cstdint>
#include <span>
#include <vector>

namespace ds4 {

struct SampleCandidates {
  // ds4.c sample_argmax over the whole row: the first id of the largest value among values
  // > -inf (NaN never wins); 0 when there is none.
  int32_t argmax = 0;
  int64_t vocab = 0;   // row length
  int64_t finite = 0;  // finite values in the row
  // The largest finite logits, value descending, equal values lower id first (the order of
  // ds4's bounded insertion list and of MTPLX's deterministic_top_k_order). Non-finite
  // values are never candidates. ids.size() == logits.size() <= the k asked for.
  std::vector<int32_t> ids;
  std::vector<float> logits;
  // MTPLX's softmax normaliser when asked for (CandidateRequest::exp_sum_temperature T > 0)
  // and the row is all finite: sum of exp(double(l) / T - double(max) / T) over the row, in
  // float64. The host reference sums in id order like MTPLX (the same bits); the GPU sums in
  // another order with its own exp (a relative difference below 1e-10), which is why the
  // MTPLX path certifies its decisions against a margin (engine/sampler_mtplx.cpp). NaN: none.
  double exp_sum = NAN;
  // Every finite value of the row is a candidate.
  bool complete() const { return int64_t(ids.size()) == finite; }
};

// What a caller asks of a row: k candidates (1..1024 on CUDA), and the normaliser at
// temperature exp_sum_temperature (<= 0: not needed).
struct CandidateRequest {
  int k = 1;
  double exp_sum_temperature = 0;
};

// The k largest finite logits of `row` (k >= 1) plus argmax/finite counts: the host reference.
void top_candidates(std::span<const float> row, int k, SampleCandidates& out);
void top_candidates(std::span<const float> row, const CandidateRequest& req, SampleCandidates& out);

}  // namespace ds4
