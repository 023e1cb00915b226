#pragma once
// For the CUDA models (include from .cu files only): the device op's result buffer and its
// pinned host copy (fixed addresses, so a captured step graph can write them), and the
// unpacking into SampleCandidates. One per model: a step's result is read right after it.
#include <algorithm>
#include <cstring>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backend/cuda/check.h"
#include "backend/cuda/memory.h"
#include "backend/cuda/sample_reduce.h"
#include "models/cuda_batching.h"
#include "models/model.h"
#include "models/sample_candidates.h"

namespace ds4 {

class CudaCandidates {
 public:
  // Always the op's maximum k: one captured graph serves every request's k, and 1024
  // candidates are 8 KiB (the row is 600 KB at 151k).
  static constexpr int kK = cuda::kSampleReduceMaxK;
  // Room for `rows` rows' results (a decode batch's forward: up to its batch rows; 1 for the
  // one-token step).
  explicit CudaCandidates(int64_t rows = 1)
      : rows_(rows),
        dev_(words() * size_t(rows) * sizeof(int32_t), "sampling candidates"),
        host_(words() * size_t(rows) * sizeof(int32_t)),
        t_dev_(sizeof(double) * size_t(rows), "sampling temperature"),
        t_host_(sizeof(double) * size_t(rows)) {
    for (int64_t i = 0; i < rows; ++i) set_temperature(0, i);
  }
  int64_t rows() const { return rows_; }
  // Row i's temperature for the next step's exp_sum (<= 0: none); read by the step's own copy.
  void set_temperature(double t, int64_t i = 0) { static_cast<double*>(t_host_.p)[i] = t; }

  // After the step's logits {vocab} are in `row` (device): the op, then the small copy back.
  // The temperature goes up inside the step, so a captured graph takes each request's value.
  void enqueue(const float* row, int64_t vocab, cudaStream_t stream) { enqueue_rows(row, size_t(vocab), 1, vocab, stream); }
  // The same for rows 0 .. n - 1 of a multi-row forward (row i at rows + i * stride floats),
  // one launch; n <= rows().
  void enqueue_rows(const float* rows, size_t stride, int64_t n, int64_t vocab, cudaStream_t stream) {
    if (n > rows_) throw Error("sampling candidates: " + std::to_string(n) + " rows, room for " + std::to_string(rows_));
    DS4_CUDA_CHECK(cudaMemcpyAsync(t_dev_.get(), t_host_.p, sizeof(double) * size_t(n), cudaMemcpyHostToDevice, stream));
    cuda::sample_reduce_f32_rows(rows, stride, n, vocab, kK, t_dev_.as<double>(), dev_.as<int32_t>(), stream);
    DS4_CUDA_CHECK(cudaMemcpyAsync(host_.p, dev_.get(), words() * size_t(n) * sizeof(int32_t), cudaMemcpyDeviceToHost,
                                   stream));
  }
  // After the stream is synchronised: row i's candidates. Hands back all kK (the caller asked
  // for <= kK: the extra ones only let the sampler decide more often, e.g. a wide min-p cut).
  void unpack(int64_t vocab, SampleCandidates& out, int64_t i = 0) const {
    const int32_t* w = static_cast<const int32_t*>(host_.p) + words() * size_t(i);
    const size_t n = size_t(w[1]);
    out.argmax = w[0];
    out.finite = w[2];
    out.vocab = vocab;
    std::memcpy(&out.exp_sum, w + 4, sizeof(double));
    const int32_t* ids = w + cuda::kSampleReduceHeader;
    out.ids.assign(ids, ids + n);
    out.logits.resize(n);
    std::memcpy(out.logits.data(), ids + w[3], n * sizeof(float));
  }

 private:
  static size_t words() { return cuda::sample_reduce_words(kK); }
  int64_t rows_;
  cuda::DeviceBuffer dev_;
  cuda::PinnedHost host_;
  cuda::DeviceBuffer t_dev_;
  cuda::PinnedHost t_host_;
};

// Model::forward_candidates of a CUDA model: false (nothing run) unless it is one token and
// k fits the op, and the caller then takes the host path. `step` runs forward(kLast) with the
// model's step switched to end in cand.enqueue() instead of the row copy (its own captured
// graph), then the candidates are unpacked; when need_full says so, this step's row, still in
// `d_row` (nothing ran since), is copied back through `pinned` {vocab floats}. `cand` is made
// on first use.
template <class Step>
bool cuda_forward_candidates(std::unique_ptr<CudaCandidates>& cand, const CandidateRequest& req, size_t tokens,
                             bool& top_only, Step&& step, const float* d_row, void* pinned, int64_t vocab,
                             cudaStream_t stream, SampleCandidates& out, std::vector<float>& logits,
                             const Model::NeedFull& need_full) {
  if (tokens != 1 || req.k > CudaCandidates::kK) return false;
  if (!cand) cand = std::make_unique<CudaCandidates>();
  cand->set_temperature(req.exp_sum_temperature);
  top_only = true;
  try {
    step();
  } catch (...) {
    top_only = false;
    throw;
  }
  top_only = false;
  logits.clear();
  cand->unpack(vocab, out);
  if (!need_full(out)) return true;
  DS4_CUDA_CHECK(cudaMemcpyAsync(pinned, d_row, size_t(vocab) * sizeof(float), cudaMemcpyDeviceToHost, stream));
  DS4_CUDA_CHECK(cudaStreamSynchronize(stream));
  const float* src = static_cast<const float*>(pinned);
  logits.assign(src, src + vocab);
  return true;
}

// The end of a multi-row forward's head: rows 0 .. n - 1 of `d_rows` (device, `stride` floats
// apart) to the pinned rows {n, vocab}, or, when `cand` is given (a decode batch that asked
// for candidates), only their candidates (CudaCandidates::enqueue_rows).
inline void enqueue_logits_rows(const float* d_rows, size_t stride, int64_t n, int64_t vocab, void* pinned,
                                CudaCandidates* cand, cudaStream_t stream) {
  if (cand) return cand->enqueue_rows(d_rows, stride, n, vocab, stream);
  DS4_CUDA_CHECK(cudaMemcpy2DAsync(pinned, size_t(vocab) * sizeof(float), d_rows, stride * sizeof(float),
                                   size_t(vocab) * sizeof(float), size_t(n), cudaMemcpyDeviceToHost, stream));
}

// Where a CUDA model's decode_batch_candidates keeps its device candidates: made on first use
// with room for the batch's rows, remade larger (and the model's batch graphs dropped: they hold
// the old buffers' addresses) when set_options raised batch_rows; `on` while a batched forward
// runs in candidates mode (the model's head then calls enqueue_logits_rows with `rows`; its
// batch-graph key adds kGraphKey).
struct BatchCandidates {
  static constexpr uint64_t kGraphKey = ~uint64_t(1);
  std::unique_ptr<CudaCandidates> rows;
  bool on = false;
  CudaCandidates* active() const { return on ? rows.get() : nullptr; }
  void key(std::vector<uint64_t>& k) const {
    if (on) k.push_back(kGraphKey);
  }
};

// Model::decode_batch_candidates of a CUDA model, on decode_batch_rows (cuda_batching.h): the
// batched forwards run in candidates mode (bc.on), so each ends in its rows' candidates (a few
// KiB per row) instead of the {n, vocab} rows copy; a row is copied back from `d_rows` (the
// forward's device logits rows, `stride` floats apart) right after its forward, before the
// next forward overwrites it, only when need_full asks for it, its request has k == 0, or its
// k is above the device op's (that row's candidates are then picked on the host). Rows that run
// alone (h.single, a forward of one row) take Model::forward_candidates. Row i's temperature
// for exp_sum goes up with its forward. drop_graphs: drops the model's batch graphs (called when
// the candidates' buffers are remade larger).
template <class State>
void cuda_decode_batch_candidates(Model& m, const std::string& family, std::span<ModelState* const> states,
                                  std::span<const int32_t> tokens, std::span<const CandidateRequest> reqs,
                                  std::vector<SampleCandidates>& out, std::vector<float>& logits,
                                  const Model::NeedFullRow& need_full, size_t most, BatchHooks<State> h,
                                  BatchCandidates& bc, const std::function<void()>& drop_graphs, const float* d_rows,
                                  size_t stride, cudaStream_t stream) {
  // Everything checked before anything is made or run (decode_batch_rows checks again: cheap).
  check_decode_batch(family + ": decode_batch_candidates", m.info(), states, tokens);
  if (reqs.size() != states.size())
    throw InputError(family + ": decode_batch_candidates: " + std::to_string(reqs.size()) + " candidate requests for " +
                     std::to_string(states.size()) + " states");
  const int64_t vocab = m.info().vocab_size;
  const size_t V = size_t(vocab);
  out.resize(states.size());
  const int64_t room = std::max<int64_t>(int64_t(most), 1);
  if (!bc.rows || bc.rows->rows() < room) {
    if (bc.rows) drop_graphs();  // they captured the old buffers
    bc.rows.reset();
    bc.rows = std::make_unique<CudaCandidates>(room);
  }
  auto on_device = [&](size_t i) { return reqs[i].k > 0 && reqs[i].k <= CudaCandidates::kK; };

  BatchRowSink sink;
  std::vector<float> row;
  sink.alone = [&](size_t i) {
    const std::span<const int32_t> tok = tokens.subspan(i, 1);
    if (reqs[i].k <= 0) {
      m.forward(*states[i], tok, Logits::kLast, row);
    } else {
      m.forward_candidates(*states[i], tok, reqs[i], out[i], row,
                           [&](const SampleCandidates& c) { return need_full(i, c); });
    }
    if (!row.empty()) std::copy(row.begin(), row.end(), logits.begin() + long(i * V));
  };
  sink.taken = [&](std::span<const size_t> rows) {
    std::vector<size_t> copied;
    for (size_t k = 0; k < rows.size(); ++k) {
      const size_t i = rows[k];
      bool want = !on_device(i);
      if (!want) {
        bc.rows->unpack(vocab, out[i], int64_t(k));
        want = need_full(i, out[i]);
      }
      if (!want) continue;
      DS4_CUDA_CHECK(cudaMemcpyAsync(logits.data() + i * V, d_rows + k * stride, V * sizeof(float),
                                     cudaMemcpyDeviceToHost, stream));
      copied.push_back(i);
    }
    if (copied.empty()) return;
    DS4_CUDA_CHECK(cudaStreamSynchronize(stream));
    for (size_t i : copied)
      if (reqs[i].k > CudaCandidates::kK) {  // above the device op: the host picks them
        top_candidates(std::span<const float>(logits.data() + i * V, V), reqs[i], out[i]);
        need_full(i, out[i]);
      }
  };
  sink.before = [&](std::span<const size_t> rows) {  // forward row k's exp_sum temperature
    for (size_t k = 0; k < rows.size(); ++k) bc.rows->set_temperature(reqs[rows[k]].exp_sum_temperature, int64_t(k));
  };
  const auto run = h.run;
  h.run = [&, run](std::span<State* const> sts) {
    bc.on = true;
    try {
      run(sts);
    } catch (...) {
      bc.on = false;
      throw;
    }
    bc.on = false;
  };
  decode_batch_rows(m, family, states, tokens, most, logits, h, sink);
}

}  // namespace ds4
