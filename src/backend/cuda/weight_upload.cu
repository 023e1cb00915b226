// Weight upload shared by the CUDA models (see weight_upload.h).
#include "backend/cuda/check.h"
#include "backend/cuda/gemv.h"
#include "backend/cuda/weight_upload.h"

namespace ds4::cuda {
namespace {

constexpr size_t kAlign = 256;
size_t align_up(size_t v) { return (v + kAlign - 1) / kAlign * kAlign; }

}  // namespace

size_t Uploader::data_bytes(const WeightMatrix& m) { return size_t(m.rows * m.row_stride_bytes()); }

size_t Uploader::scale_bytes(const WeightMatrix& m) {
  // MLX by type too: a fill-mode host view may have null scales.
  const bool mlx = m.scales || m.type == DType::MLX_Q4 || m.type == DType::MLX_Q8;
  return mlx ? size_t(m.rows * (m.cols / m.group_size) * row_bytes(m.scale_type, 1)) : 0;
}

Uploader::Uploader(uint8_t* base, MatrixFill* fill, StagedUpload* sink) : base_(base), fill_(fill), sink_(sink) {
  DS4_CHECK(!base || sink, "Uploader: a copy pass needs its staged upload");
}

const void* Uploader::add_run(const std::vector<std::pair<const void*, size_t>>& pieces) {
  const size_t off = used_;
  size_t at = off;
  for (const auto& [host, bytes] : pieces) {
    if (base_) sink_->put(at, host, bytes);
    at += bytes;
    payload_ += bytes;
  }
  used_ = align_up(at);
  return base_ ? base_ + off : nullptr;
}

DeviceBuffer upload_two_pass(const std::string& what, MatrixFill* fill, const std::function<void(Uploader&)>& bind,
                             const StagingOptions& opt) {
  Uploader sizing(nullptr, fill);
  bind(sizing);
  DeviceBuffer buf(sizing.used(), what);  // admission inside
  StagingOptions o = opt;
  o.max_gap = kAlign - 1;  // a shorter gap is alignment padding (a fill's space is a hole: never bridged)
  StagedUpload st(buf.as<uint8_t>(), sizing.payload(), what, o);
  Uploader copy(buf.as<uint8_t>(), fill, &st);
  bind(copy);
  DS4_CHECK(copy.used() == sizing.used(), what + ": the copy pass placed " + std::to_string(copy.used()) +
                                              " bytes, the sizing pass " + std::to_string(sizing.used()));
  // The fills run on their own stream (the legacy default one); the model's non-blocking
  // step stream would not wait for them. Before finish(), so that its closing line's time
  // includes them (fill bytes count as done when launched).
  DS4_CUDA_CHECK(cudaDeviceSynchronize());
  st.finish();
  return buf;
}

const float* Uploader::vec(const std::vector<float>& v, float offset) {
  std::vector<float> t(v);
  for (float& x : t) x += offset;
  return static_cast<const float*>(add(t.data(), t.size() * sizeof(float)));
}

WeightMatrix Uploader::reserve(const WeightMatrix& m, int64_t rows) {
  WeightMatrix d = m;
  d.rows = rows;
  d.data = add(nullptr, data_bytes(d));
  if (scale_bytes(m) > 0) {
    d.scales = add(nullptr, scale_bytes(d));
    d.biases = add(nullptr, scale_bytes(d));
  }
  if (base_) (*fill_)(d);
  return d;
}

WeightMatrix Uploader::mat(const WeightMatrix& m) {
  if (fill_) return reserve(m, m.rows);
  WeightMatrix d = m;
  d.data = add(m.data, data_bytes(m));
  if (m.scales) {
    d.scales = add(m.scales, scale_bytes(m));
    d.biases = add(m.biases, scale_bytes(m));
  }
  return d;
}

DProj Uploader::proj(const std::vector<const WeightMatrix*>& ms, bool fuse) {
  DProj d;
  bool same = fuse;
  for (const WeightMatrix* m : ms) {
    d.rows += m->rows;
    same = same && m->type == ms[0]->type && m->cols == ms[0]->cols && m->group_size == ms[0]->group_size &&
           m->scale_type == ms[0]->scale_type && (m->scales != nullptr) == (ms[0]->scales != nullptr);
  }
  if (!same || ms.size() == 1) {
    for (const WeightMatrix* m : ms) d.parts.push_back(mat(*m));
    return d;
  }
  if (fill_) {  // the stacked matrix is one fill (same type and width as every part)
    d.fused = reserve(*ms[0], d.rows);
    return d;
  }
  d.fused = *ms[0];
  d.fused.rows = d.rows;
  std::vector<std::pair<const void*, size_t>> data, scales, biases;
  for (const WeightMatrix* m : ms) {
    data.push_back({m->data, data_bytes(*m)});
    if (m->scales) {
      scales.push_back({m->scales, scale_bytes(*m)});
      biases.push_back({m->biases, scale_bytes(*m)});
    }
  }
  d.fused.data = add_run(data);
  if (ms[0]->scales) {
    d.fused.scales = add_run(scales);
    d.fused.biases = add_run(biases);
  }
  return d;
}

DExperts Uploader::experts(const std::vector<WeightMatrix>& es) {
  DExperts d;
  d.first = es[0];
  d.stride = align_up(data_bytes(es[0]));
  d.scale_stride = align_up(scale_bytes(es[0]));
  if (fill_) {  // data, then scales, then biases, each at its stride (as below)
    const bool mlx = scale_bytes(es[0]) > 0;
    std::vector<WeightMatrix> v(es.size(), es[0]);
    for (auto& e : v) e.data = add(nullptr, data_bytes(es[0]));
    for (auto& e : v) e.scales = mlx ? add(nullptr, scale_bytes(es[0])) : nullptr;
    for (auto& e : v) e.biases = mlx ? add(nullptr, scale_bytes(es[0])) : nullptr;
    if (base_)
      for (const auto& e : v) (*fill_)(e);
    d.first = v[0];
    return d;
  }
  for (size_t e = 0; e < es.size(); ++e) {
    const void* p = add(es[e].data, data_bytes(es[0]));
    if (e == 0) d.first.data = p;
  }
  if (es[0].scales) {
    for (size_t e = 0; e < es.size(); ++e) {
      const void* p = add(es[e].scales, scale_bytes(es[0]));
      if (e == 0) d.first.scales = p;
    }
    for (size_t e = 0; e < es.size(); ++e) {
      const void* p = add(es[e].biases, scale_bytes(es[0]));
      if (e == 0) d.first.biases = p;
    }
  }
  return d;
}

void gemv_proj(const DProj& p, const float* x, float* y, cudaStream_t stream) {
  gemv_proj(p, x, y, stream, GemvOptions{});
}

void gemv_proj(const DProj& p, const float* x, float* y, cudaStream_t stream, const GemvOptions& opt) {
  if (p.fused.rows > 0) return gemv(p.fused, x, y, stream, opt);
  for (const WeightMatrix& m : p.parts) {
    gemv(m, x, y, stream, opt);
    y += m.rows;
  }
}

void gemv_proj_rows(const DProj& p, const float* x, float* y, const GemvRows& r, cudaStream_t stream) {
  if (p.fused.rows > 0) return gemv_rows(p.fused, x, y, r, stream);
  for (const WeightMatrix& m : p.parts) {
    gemv_rows(m, x, y, r, stream);
    y += m.rows;
  }
}

}  // namespace ds4::cuda
