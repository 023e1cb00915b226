// verify_batch of the CUDA DeepSeek V4 model (continuous batching with speculative decoding,
// issue #24): the verify windows of N states (1..chunk_rows tokens each, each state at its own
// position) as one forward over the stacked rows, each weight read once for all of them. The
// rows run the chunk's code (chunk.cu) with one row group per state: its stateful kernels (KV
// ring, compressor / indexer lanes with their undo logs in the state's cap_buf, indexer top-k,
// attention, the MTP head's layer and the DSpark rings) launch once per window exactly as that
// window's own verify chunk launches them, and every product is exact (never the tensor-core
// GEMMs), so window i's rows and records equal verify_capture(*states[i], windows[i]) bit for
// bit (test_deepseek_v4_verify_batch_cuda). A forward is captured as a CUDA graph per
// composition: the states' serials and their window lengths (backend/cuda/batch_graphs.h).
#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "core/error.h"
#include "models/cuda_batching.h"
#include "models/deepseek_v4/cuda/model_impl.h"
#include "models/draft_head.h"

namespace ds4::deepseek_v4 {

namespace {
// Between a verify key's serials and its window lengths: no decode_batch key (serials only,
// never this value) equals a verify key in the shared graph cache.
constexpr uint64_t kVerifyKeyMark = ~uint64_t(0);
}  // namespace

void DeepseekV4CudaModel::Impl::run_verify(std::span<const RowGroup> groups) {
  std::vector<uint64_t> key;
  for (const RowGroup& g : groups) key.push_back(g.st->serial);
  key.push_back(kVerifyKeyMark);
  for (const RowGroup& g : groups) key.push_back(uint64_t(g.n));
  capturing = true;  // windows of one row record nothing (attention_rows, mtp_record_rows)
  try {
    run_groups(groups, std::move(key));
  } catch (...) {
    capturing = false;
    throw;
  }
  capturing = false;
}

bool DeepseekV4CudaModel::verify_batch(std::span<ModelState* const> states,
                                       std::span<const std::span<const int32_t>> windows, std::vector<float>& logits) {
  Impl& m = *impl_;
  // verify_capture's own limits (spec_commit.cu): one chunk per window, no layer observer.
  bool batched = !m.observer && m.cl.rows >= 2;
  for (const auto& w : windows)
    batched = batched && (w.size() <= 1 || (int64_t(w.size()) <= m.opt.chunk_rows && int64_t(w.size()) <= m.cap.rows));
  if (!batched) return Model::verify_batch(states, windows, logits);
  return captured_verify_batch(
      *this, states, windows, logits, "deepseek_v4: verify_batch",
      [&](ModelState& s) {
        CudaState& st = cuda_state(s);
        if (st.cap_rows > 0) throw Error("deepseek_v4: verify_batch over an uncommitted captured window");
        if (!st.cap_buf.get()) st.cap_buf = dc::DeviceBuffer(m.cap.bytes, "deepseek_v4 verify capture (per state)");
      },
      [&] {
        // The head a state records (MTP, DSpark, none) is fixed per forward (enqueue_chunk).
        std::vector<int> kind;
        for (ModelState* s : states) kind.push_back(cuda_state(*s).mtp_on ? 1 : cuda_state(*s).dspark_on ? 2 : 0);
        verify_batch_rows<CudaState>(
            *this, states, windows, kind, size_t(m.opt.batch_rows), m.cl.rows, logits, m.batch_hooks(),
            [&](std::span<CudaState* const> sts, std::span<const int64_t> lens) {
              std::vector<RowGroup> groups;
              int64_t r0 = 0;
              for (size_t i = 0; i < sts.size(); ++i) groups.push_back(RowGroup{sts[i], r0, lens[i]}), r0 += lens[i];
              m.run_verify(groups);
            });
      },
      [&](ModelState& s, std::span<const int32_t> w) { cuda_state(s).cap_rows = int64_t(w.size()); },
      [&](ModelState&) {});  // cap_rows stays 0: nothing pending to drop
}

}  // namespace ds4::deepseek_v4
