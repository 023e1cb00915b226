// Weight upload for the CUDA Qwen model through backend/cuda/weight_upload.h: one pass
// sizes everything, admission checks it, a second pass copies into one device buffer
// (pinned staging, progress on stderr).
#include <cuda_runtime.h>

#include <utility>
#include <vector>

#include "models/qwen_next/cuda/device_weights.h"

namespace ds4::qwen_next::cuda {
namespace {

using ds4::cuda::Uploader;

DHyper hyper(Uploader& u, const HyperWeights& h, bool fuse) {
  DHyper d;
  d.norm = u.vec(h.norm, 1.0f);
  d.down_inject = h.inject.rows > 0 ? u.proj({&h.down, &h.inject}, fuse) : u.proj({&h.down}, fuse);
  d.up = u.mat(h.up);
  return d;
}

DLayer layer(Uploader& u, const LayerWeights& w, bool fuse) {
  DLayer d;
  d.attn_hc = hyper(u, w.attn_hc, fuse);
  d.mlp_hc = hyper(u, w.mlp_hc, fuse);
  if (w.gdn) {
    const GdnWeights& g = *w.gdn;
    d.gdn = DGdn{u.proj({&g.qkv, &g.z, &g.b, &g.a}, fuse), u.mat(g.out), u.vec(g.conv, 0.f), u.vec(g.a_log, 0.f),
                 u.vec(g.dt_bias, 0.f), u.vec(g.norm, 0.f)};
  }
  if (w.qsa) {
    const QsaWeights& a = *w.qsa;
    d.qsa = DQsa{u.proj({&a.q, &a.k, &a.v, &a.idx_qk}, fuse), u.mat(a.o), u.vec(a.q_norm, 1.f), u.vec(a.k_norm, 1.f),
                 u.vec(a.idx_q_norm, 1.f), u.vec(a.idx_k_norm, 1.f)};
  }
  if (w.ple) {
    const PleWeights& p = *w.ple;
    d.ple = DPle{u.proj({&p.key, &p.value}, fuse), u.vec(p.norm_key, 1.f), u.vec(p.norm_query, 1.f),
                 u.vec(p.norm_conv, 1.f), u.vec(p.conv, 0.f), -1};
  }
  const MoeWeights& m = w.moe;
  d.moe.in = u.proj({&m.sh_gate, &m.sh_up, &m.router, &m.sh_gate_scalar}, fuse);
  d.moe.sh_down = u.mat(m.sh_down);
  d.moe.gate_up = u.experts(m.gate_up);
  d.moe.down = u.experts(m.down);
  return d;
}

void bind_all(Uploader& u, const Weights& w, const std::vector<float>& inv_freq, bool fuse, bool with_mtp,
              DeviceWeights& d) {
  d.layers.clear();
  int64_t ple_index = 0;
  for (const auto& l : w.layers) {
    d.layers.push_back(layer(u, l, fuse));
    if (d.layers.back().ple) d.layers.back().ple->index = ple_index++;
  }
  d.mixer = hyper(u, w.mixer, fuse);
  d.lm_head = u.mat(w.lm_head);
  d.inv_freq = u.vec(inv_freq, 0.f);
  d.trunk_bytes = u.used();
  d.mtp.reset();
  if (!with_mtp || !w.mtp) return;
  const MtpWeights& m = *w.mtp;
  d.mtp = DMtp{u.vec(m.norm_emb, 1.f), u.vec(m.norm_hidden, 1.f), u.mat(m.fc_emb), u.mat(m.fc_hidden),
               layer(u, m.layer, fuse), hyper(u, m.mixer, fuse)};
  d.embed = u.mat(w.embed);
}

}  // namespace

DeviceWeights upload_weights(const Config& c, const Weights& w, const std::vector<float>& inv_freq, bool fuse,
                             ds4::cuda::MatrixFill* fill, bool with_mtp) {
  (void)c;
  DeviceWeights d;
  d.buffer = ds4::cuda::upload_two_pass("qwen_next weights", fill,
                                        [&](Uploader& u) { bind_all(u, w, inv_freq, fuse, with_mtp, d); });
  return d;
}

}  // namespace ds4::qwen_next::cuda
