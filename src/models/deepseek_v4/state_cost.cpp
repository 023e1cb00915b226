#include "models/deepseek_v4/state_cost.h"

#include <algorithm>

namespace ds4::deepseek_v4 {
namespace {
// One compressor lane at its largest: a full open window ({ratio, width} kv and gate) and,
// for an overlapping (CSA) lane, the last closed window's Ca half ({ratio, dim} kv and gate).
double lane_fixed_floats(const CompressorWeights& w, int64_t ratio) {
  double f = 2.0 * double(ratio * w.width);
  if (w.width == 2 * w.dim) f += 2.0 * double(ratio * w.dim);
  return f;
}

// A layer's floats: fixed (its sliding window of window - 1 rows, its lanes' open windows)
// and per token (one compressed entry of `dim` floats every `ratio` tokens per lane).
void layer_floats(const Config& c, const LayerWeights& l, int64_t ratio, double& fixed, double& per) {
  fixed += double(std::max<int64_t>(0, c.window - 1) * c.head_dim);
  if (ratio <= 0) return;
  if (l.has_compressor) fixed += lane_fixed_floats(l.comp, ratio), per += double(l.comp.dim) / double(ratio);
  if (l.has_indexer) fixed += lane_fixed_floats(l.index, ratio), per += double(l.index.dim) / double(ratio);
}
}  // namespace

StateCost state_cost(const Config& c, const Weights& w, StateCost fresh, bool draft) {
  double fixed = 0, per = 0;
  for (size_t l = 0; l < w.layers.size(); ++l) layer_floats(c, w.layers[l], c.ratio(int64_t(l)), fixed, per);
  if (draft && w.mtp) {  // the MTP block's sliding window and its last output HC rows
    layer_floats(c, w.mtp->block, 0, fixed, per);
    fixed += double(c.hc * c.hidden);
  }
  if (draft && w.dspark)  // every DSpark stage's ring of the last `window` K/V rows
    fixed += double(w.dspark->stages.size()) * double(c.window * c.head_dim);
  return {fresh.fixed + fixed * sizeof(float), fresh.per_token + per * sizeof(float)};
}

}  // namespace ds4::deepseek_v4
