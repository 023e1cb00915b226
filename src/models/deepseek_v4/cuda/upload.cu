// Weight upload for the CUDA DeepSeek V4 model: one pass sizes everything, admission checks
// it, a second pass copies each tensor from its mmap'd bytes into one device buffer
// (256-byte aligned pieces) through the shared pinned staging (backend/cuda/weight_upload.h,
// which does every byte of the copy; this file only decides the layout). Nothing is held in
// host RAM beyond the page cache and the staging buffers.
#include <cuda_runtime.h>

#include <cstring>
#include <utility>
#include <vector>

#include "backend/cuda/weight_upload.h"
#include "models/deepseek_v4/cuda/device_weights.h"

namespace ds4::deepseek_v4::cuda {
namespace {

constexpr size_t kAlign = 256;
size_t align_up(size_t v) { return (v + kAlign - 1) / kAlign * kAlign; }
size_t data_bytes(const WeightMatrix& m) { return size_t(m.rows * m.row_stride_bytes()); }

// DeepSeek's layouts (runs of stacked projections, gate+up experts, split hc matrices) over
// the shared uploader's pieces: sizing pass when it is not copying, copy pass otherwise.
class Binder {
 public:
  explicit Binder(ds4::cuda::Uploader& u) : u_(u) {}
  const void* add(const void* host, size_t bytes) { return u_.add(host, bytes); }
  const void* add_run(const std::vector<std::pair<const void*, size_t>>& pieces) { return u_.add_run(pieces); }
  // Consecutive parts of one type and width become one stacked matrix (fuse), else one each.
  DProj proj(const std::vector<const WeightMatrix*>& ms, bool fuse) {
    DProj d;
    for (size_t i = 0; i < ms.size();) {
      size_t j = i + 1;
      while (fuse && j < ms.size() && ms[j]->type == ms[i]->type && ms[j]->cols == ms[i]->cols) ++j;
      WeightMatrix run = *ms[i];
      std::vector<std::pair<const void*, size_t>> pieces;
      run.rows = 0;
      for (size_t k = i; k < j; ++k) {
        if (ms[k]->scales) throw InputError("deepseek_v4 cuda: MLX affine weights are not supported");
        pieces.push_back({ms[k]->data, data_bytes(*ms[k])});
        run.rows += ms[k]->rows;
      }
      run.data = add_run(pieces);
      d.runs.push_back(run);
      d.rows += run.rows;
      i = j;
    }
    return d;
  }
  const float* vec(const std::vector<float>& v) {
    return static_cast<const float*>(add(v.data(), v.size() * sizeof(float)));
  }
  WeightMatrix mat(const WeightMatrix& m) {
    if (m.scales) throw InputError("deepseek_v4 cuda: MLX affine weights are not supported");
    WeightMatrix d = m;
    d.data = add(m.data, data_bytes(m));
    return d;
  }
  // Expert e = [a_e; b_e] (b optional) at a fixed stride: gemv_batched picks it by id.
  DExperts experts(const std::vector<WeightMatrix>& a, const std::vector<WeightMatrix>* b = nullptr) {
    DExperts d;
    d.first = a[0];
    const size_t bytes = data_bytes(a[0]) + (b ? data_bytes((*b)[0]) : 0);
    d.stride = align_up(bytes);
    if (b) {
      if ((*b)[0].type != a[0].type || (*b)[0].cols != a[0].cols)
        throw InputError("deepseek_v4 cuda: expert gate and up differ in type or width");
      d.first.rows += (*b)[0].rows;
    }
    for (size_t e = 0; e < a.size(); ++e) {
      if (a[e].type != a[0].type || a[e].rows != a[0].rows || a[e].cols != a[0].cols ||
          (b && ((*b)[e].type != a[0].type || (*b)[e].rows != (*b)[0].rows || (*b)[e].cols != a[0].cols)))
        throw InputError("deepseek_v4 cuda: experts of one layer differ in type or shape");
      std::vector<std::pair<const void*, size_t>> pieces{{a[e].data, data_bytes(a[0])}};
      if (b) pieces.push_back({(*b)[e].data, data_bytes((*b)[0])});
      const void* p = add_run(pieces);
      if (e == 0) d.first.data = p;
    }
    return d;
  }
  DHc hc(const HcBlock& h) {
    DHc d;
    d.base = vec(h.base);
    d.scale = vec(h.scale);
    const WeightMatrix& f = h.fn;
    const size_t row_b = size_t(f.row_stride_bytes());
    auto whole = [&](int64_t sp) {  // column blocks of whole quant blocks, bytes splitting evenly
      if (f.cols % sp || f.cols / sp < 64) return false;  // (the tiny test model splits too)
      const WeightMatrix part{f.type, 1, f.cols / sp};
      return size_t(part.row_stride_bytes()) * size_t(sp) == row_b && part.row_stride_bytes() % 16 == 0;
    };
    int64_t sp = 1;
    while (sp < ds4::cuda::hc_split_target() && whole(sp * 2)) sp *= 2;
    d.fn = f;
    d.fn.cols = f.cols / sp;
    d.splits = sp;
    const size_t chunk = row_b / size_t(sp);
    d.split_stride = size_t(f.rows) * chunk;
    std::vector<uint8_t> t;  // staged by add() before it returns: a temporary is fine
    if (u_.copying()) {  // {splits, rows, chunk}: column block s of every row, then the next block
      t.resize(size_t(f.rows) * row_b);
      const uint8_t* src = static_cast<const uint8_t*>(f.data);
      for (int64_t s = 0; s < sp; ++s)
        for (int64_t r = 0; r < f.rows; ++r)
          std::memcpy(t.data() + (size_t(s * f.rows + r)) * chunk, src + size_t(r) * row_b + size_t(s) * chunk, chunk);
    }
    d.fn.data = add(t.data(), size_t(f.rows) * row_b);
    return d;
  }
  DCompressor comp(const CompressorWeights& c) {  // kv / gate projections live in DLayer::attn_in
    return DCompressor{vec(c.ape), vec(c.norm), c.dim, c.width, c.indexer};
  }

 private:
  ds4::cuda::Uploader& u_;
};

DLayer layer(Binder& u, const Config& c, const LayerWeights& w, int64_t l, bool fuse) {
  DLayer d;
  std::vector<const WeightMatrix*> in{&w.q_a, &w.kv};
  if (c.ratio(l) > 0) in.insert(in.end(), {&w.comp.kv, &w.comp.gate});
  if (w.has_indexer) in.insert(in.end(), {&w.index.kv, &w.index.gate, &w.index_proj});
  d.attn_in = u.proj(in, fuse);
  d.moe_in = u.proj({&w.sh_gate, &w.sh_up, &w.router}, fuse);
  d.attn_hc = u.hc(w.attn_hc);
  d.ffn_hc = u.hc(w.ffn_hc);
  d.attn_norm = u.vec(w.attn_norm);
  d.ffn_norm = u.vec(w.ffn_norm);
  d.q_b = u.mat(w.q_b);
  d.o_a = u.mat(w.o_a);
  d.o_b = u.mat(w.o_b);
  d.q_a_norm = u.vec(w.q_a_norm);
  d.kv_norm = u.vec(w.kv_norm);
  d.sinks = u.vec(w.sinks);
  d.ratio = c.ratio(l);
  d.has_indexer = w.has_indexer;
  if (d.ratio > 0) d.comp = u.comp(w.comp);
  if (w.has_indexer) {
    d.index = u.comp(w.index);
    d.index_q_b = u.mat(w.index_q_b);
  }
  if (!w.router_bias.empty()) d.router_bias = u.vec(w.router_bias);
  if (c.hash_moe[size_t(l)])
    d.tid2eid = static_cast<const int32_t*>(u.add(w.tid2eid.data(), w.tid2eid.size() * sizeof(int32_t)));
  d.gate_up = u.experts(w.exp_gate, &w.exp_up);
  d.down = u.experts(w.exp_down);
  d.sh_down = u.mat(w.sh_down);
  return d;
}

void bind_all(Binder& u, const Config& c, const Weights& w, const std::vector<float>& inv_main,
              const std::vector<float>& inv_comp, const UploadOptions& o, DeviceWeights& d) {
  const bool fuse = o.fuse, mtp = o.mtp;
  d.layers.clear();
  for (int64_t l = 0; l < c.layers; ++l) d.layers.push_back(layer(u, c, w.layers[size_t(l)], l, fuse));
  d.has_mtp = mtp;
  if (mtp) {  // the block as one more layer (sliding, top-k): the trunk's code runs it
    const MtpWeights& m = *w.mtp;
    d.layers.push_back(layer(u, c, m.block, c.layers, fuse));
    d.mtp.e_proj = u.mat(m.e_proj);
    d.mtp.h_proj = u.mat(m.h_proj);
    d.mtp.enorm = u.vec(m.enorm);
    d.mtp.hnorm = u.vec(m.hnorm);
    d.mtp.norm = u.vec(m.norm);
    d.mtp.head_hc = u.hc(m.head_hc);
  }
  d.has_dspark = o.dspark;
  if (o.dspark) {  // the stages as layers c.layers.. (sliding, top-k): the trunk's code runs them
    const DsparkWeights& s = *w.dspark;
    for (size_t i = 0; i < s.stages.size(); ++i)
      d.layers.push_back(layer(u, c, s.stages[i], c.layers + int64_t(i), fuse));
    DDspark& q = d.dspark;
    q.main_proj = u.mat(s.main_proj);
    q.main_norm = u.vec(s.main_norm);
    q.norm = u.vec(s.norm);
    std::vector<const WeightMatrix*> kv;
    for (const LayerWeights& st : s.stages) kv.push_back(&st.kv);
    q.ring_kv = u.proj(kv, fuse);
    q.head_hc = u.hc(s.head_hc);
    q.markov_w1 = u.mat(s.markov_w1);
    q.markov_w2 = u.mat(s.markov_w2);
    q.conf_proj = u.vec(s.conf_proj);
    q.rank = s.rank;
  }
  if (mtp || o.dspark) d.embed = u.mat(w.embed);
  d.head_hc = u.hc(w.head_hc);
  d.norm = u.vec(w.norm);
  d.lm_head = u.mat(w.lm_head);
  d.inv_main = u.vec(inv_main);
  d.inv_comp = u.vec(inv_comp);
}

size_t mbytes(const WeightMatrix& m) { return data_bytes(m); }

}  // namespace

DeviceWeights upload_weights(const Config& c, const Weights& w, const std::vector<float>& inv_main,
                             const std::vector<float>& inv_comp, const UploadOptions& o) {
  DeviceWeights d;
  if (o.mtp && (!w.mtp || int64_t(c.attn_types.size()) <= c.layers))
    throw Error("deepseek_v4 cuda: MTP upload without the head's weights or its layer in the config");
  if (o.dspark && (o.mtp || !w.dspark || int64_t(c.attn_types.size()) < c.layers + int64_t(w.dspark->stages.size())))
    throw Error("deepseek_v4 cuda: DSpark upload with the MTP head, without its weights or its stages in the config");
  d.buffer = ds4::cuda::upload_two_pass("deepseek_v4 weights", nullptr, [&](ds4::cuda::Uploader& u) {
    Binder b(u);
    bind_all(b, c, w, inv_main, inv_comp, o, d);
  });
  return d;
}

DecodeBytes decode_bytes_per_token(const Config& c, const Weights& w) {
  DecodeBytes b;
  b.head = mbytes(w.head_hc.fn) + mbytes(w.lm_head);
  for (int64_t l = 0; l < c.layers; ++l) {
    const LayerWeights& L = w.layers[size_t(l)];
    b.dense += mbytes(L.attn_hc.fn) + mbytes(L.ffn_hc.fn) + mbytes(L.q_a) + mbytes(L.q_b) + mbytes(L.kv) +
               mbytes(L.o_a) + mbytes(L.o_b) + mbytes(L.router) + mbytes(L.sh_gate) + mbytes(L.sh_up) +
               mbytes(L.sh_down);
    if (c.ratio(l) > 0) b.dense += mbytes(L.comp.kv) + mbytes(L.comp.gate);
    if (L.has_indexer)
      b.dense += mbytes(L.index.kv) + mbytes(L.index.gate) + mbytes(L.index_q_b) + mbytes(L.index_proj);
    b.experts += size_t(c.experts_used) * (mbytes(L.exp_gate[0]) + mbytes(L.exp_up[0]) + mbytes(L.exp_down[0]));
  }
  return b;
}

}  // namespace ds4::deepseek_v4::cuda
