// Captured-prefix commit of the CUDA GLM 5.x model (speculative decoding; CPU reference:
// spec_commit.cpp, same semantics). verify_capture runs the verify rows as one chunk
// (chunk.cu) while every KDA layer also records, in the state's capture buffer, what it
// cannot cut back: its conv window before the rows, its conv input rows and its recurrent
// matrix after every row (delta_rule_rows' states). commit_prefix(keep) then costs copies:
//   KDA   recurrent matrix <- the record after row keep-1; conv window <- the last K-1 rows
//         of [conv before the window ; conv input rows 0..keep-1]
//   DSA   nothing to copy: the latent / indexer caches and finished pools are indexed by
//         position, so setting the position counter back to pos0 + keep makes the dropped
//         rows dead (each is rewritten before anything reads it: a query at p reads rows
//         <= p and pools complete at p)
//   MTP   the dropped rows' queued pairs go and the queue row of the last kept token becomes
//         the head's last trunk row (drop_pending_pairs of models/capture_rows.h)
//   pos   host and device counter = pos0 + keep.
#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include "backend/cuda/check.h"
#include "core/error.h"
#include "models/capture_rows.h"
#include "models/glm5/cuda/model_impl.h"

namespace ds4::glm5 {
namespace {

__global__ void set_i32_kernel(int32_t* p, int32_t v) { *p = v; }

struct CapSizes {
  int64_t conv0 = 0, row_in = 0, row_rec = 0;  // floats: conv window, one conv input row, one recurrent matrix
};
CapSizes cap_sizes(const Config& c) {
  const int64_t qkv = c.linear_num_heads * c.linear_head_dim;
  return {(c.linear_conv_kernel_dim - 1) * 3 * qkv, 3 * qkv, c.linear_num_heads * c.linear_head_dim * c.linear_head_dim};
}
// Bytes of one KDA layer's records for `rows` rows: conv0, conv_in, rec, each 256-aligned.
size_t cap_block(const Config& c, int64_t rows, size_t* in_off, size_t* rec_off) {
  const CapSizes z = cap_sizes(c);
  const size_t a = layout_align(size_t(z.conv0) * 4), b = layout_align(size_t(rows * z.row_in) * 4);
  if (in_off) *in_off = a;
  if (rec_off) *rec_off = a + b;
  return a + b + layout_align(size_t(rows * z.row_rec) * 4);
}

}  // namespace

Glm5CudaModel::Impl::KdaCapPtrs Glm5CudaModel::Impl::cap_ptrs(CudaState& st, int64_t l) const {
  if (c.layer_types[size_t(l)] != LayerKind::kLinear || st.cap_rows == 0) return {};
  int64_t j = 0;  // KDA layers before l
  for (int64_t i = 0; i < l; ++i) j += c.layer_types[size_t(i)] == LayerKind::kLinear;
  size_t in_off = 0, rec_off = 0;
  const size_t block = cap_block(c, st.cap_rows, &in_off, &rec_off);
  uint8_t* b = st.cap.as<uint8_t>() + size_t(j) * block;
  return {reinterpret_cast<float*>(b), reinterpret_cast<float*>(b + in_off), reinterpret_cast<float*>(b + rec_off)};
}

void Glm5CudaModel::Impl::cap_reserve(CudaState& st, int64_t rows) {
  if (st.cap_rows >= rows) return;
  int64_t nkda = 0;
  for (LayerKind k : c.layer_types) nkda += k == LayerKind::kLinear;
  st.cap = dc::DeviceBuffer(std::max<size_t>(size_t(nkda) * cap_block(c, rows, nullptr, nullptr), 256),
                            "glm5 verify capture (KDA per-row states)");
  st.cap_rows = rows;
  // Captured-verify graphs hold the old buffer's addresses.
  for (auto it = st.chunk_graph.begin(); it != st.chunk_graph.end();) {
    if (it->first >= kCaptureKey) {
      if (it->second) cudaGraphExecDestroy(it->second);
      it = st.chunk_graph.erase(it);
    } else {
      ++it;
    }
  }
}

bool Glm5CudaModel::verify_capture(ModelState& trial, std::span<const int32_t> tokens, std::vector<float>& logits) {
  CudaState& st = cuda_state(trial);
  Impl& m = *impl_;
  const int64_t n = int64_t(tokens.size());
  if (st.cap_n > 0) throw Error("glm5: verify_capture over an uncommitted captured window");
  // The records come from one chunk: more rows than a chunk (or no chunk path) cannot capture.
  if (n == 0 || (n > 1 && (m.opt.chunk_rows < 2 || n > m.opt.chunk_rows))) return false;
  const int64_t pos0 = st.pos;
  if (n > 1) m.cap_reserve(st, n);
  m.capturing = n > 1;  // one row: keep = 1 = all, nothing to cut back
  try {
    forward(st, tokens, Logits::kAll, logits);
  } catch (...) {
    m.capturing = false;
    throw;
  }
  m.capturing = false;
  st.cap_n = n;
  st.cap_pos0 = pos0;
  return true;
}

void Glm5CudaModel::commit_prefix(ModelState& trial, int64_t keep) {
  CudaState& st = cuda_state(trial);
  Impl& m = *impl_;
  const Config& c = m.c;
  const int64_t n = st.cap_n;
  check_commit_keep("glm5", n, keep);
  if (keep < n) {
    const CapSizes z = cap_sizes(c);
    const int64_t K1 = c.linear_conv_kernel_dim - 1;
    uint8_t* sb = st.buf.as<uint8_t>();
    const size_t row = size_t(z.row_in) * sizeof(float);
    for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
      const Impl::KdaCapPtrs p = m.cap_ptrs(st, l);
      if (!p.rec) continue;  // a DSA layer
      const LayerOffsets& o = m.lay.layers[size_t(l)];
      DS4_CUDA_CHECK(cudaMemcpyAsync(sb + o.rec, p.rec + (keep - 1) * z.row_rec, size_t(z.row_rec) * sizeof(float),
                                     cudaMemcpyDeviceToDevice, m.stream));
      // conv = rows keep .. keep+K1-1 of [conv0 (K1 rows) ; conv_in rows 0..keep-1]
      const int64_t c0 = std::max<int64_t>(0, K1 - keep);  // rows still from conv0 (from its row keep)
      if (c0 > 0)
        DS4_CUDA_CHECK(cudaMemcpyAsync(sb + o.conv, p.conv0 + keep * z.row_in, size_t(c0) * row,
                                       cudaMemcpyDeviceToDevice, m.stream));
      if (K1 - c0 > 0)
        DS4_CUDA_CHECK(cudaMemcpyAsync(sb + o.conv + size_t(c0) * row, p.conv_in + (keep - (K1 - c0)) * z.row_in,
                                       size_t(K1 - c0) * row, cudaMemcpyDeviceToDevice, m.stream));
    }
    if (st.mtp_on) {
      const int64_t drop = n - keep, P = int64_t(st.pending_next.size()), H = c.hidden_size;
      if (P < drop) throw Error("glm5: commit_prefix: draft-head pending rows out of step");
      DS4_CUDA_CHECK(cudaMemcpyAsync(sb + m.lay.mtp.last, sb + m.lay.mtp.queue + size_t((P - drop) * H) * sizeof(float),
                                     size_t(H) * sizeof(float), cudaMemcpyDeviceToDevice, m.stream));
      st.pending_next.resize(size_t(P - drop));
      set_i32_kernel<<<1, 1, 0, m.stream>>>(reinterpret_cast<int32_t*>(sb + m.lay.mtp.qlen), int32_t(P - drop));
      DS4_CUDA_CHECK_LAUNCH();
    }
    st.pos = st.cap_pos0 + keep;
    set_i32_kernel<<<1, 1, 0, m.stream>>>(reinterpret_cast<int32_t*>(sb + m.lay.pos), int32_t(st.pos));
    DS4_CUDA_CHECK_LAUNCH();
    DS4_CUDA_CHECK(cudaStreamSynchronize(m.stream));
  }
  st.cap_n = 0;
}

}  // namespace ds4::glm5
