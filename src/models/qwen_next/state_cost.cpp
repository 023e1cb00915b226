#include "models/qwen_next/state_cost.h"

#include <algorithm>

#include "models/qwen_next/model.h"

namespace ds4::qwen_next {

StateCost state_cost(const Config& c, StateCost fresh, bool draft) {
  // A QSA layer per position: its K and V rows, its raw indexer key, and 1/idx_ratio of a
  // pooled block key (qsa.cpp). GDN and PLE state is fixed (in `fresh`).
  const double qsa = 2.0 * double(c.kv_heads * c.head_dim) + double(c.idx_dim) +
                     double(c.idx_dim) / double(std::max<int64_t>(1, c.idx_ratio));
  double per = 0;
  for (bool linear : c.is_linear)
    if (!linear) per += qsa;
  double fixed = double(c.wide());  // last_wide: the trunk row of the last consumed token
  // The MTP head's own QSA layer history, and the widened trunk rows queued for it until its
  // next draft (a prompt's rows wait until the turn's first draft): bounded together.
  if (draft) per += qsa + double(c.wide());
  return {fresh.fixed + fixed * sizeof(float), fresh.per_token + per * sizeof(float)};
}

StateCost QwenNextModel::state_cost(bool draft) {
  return qwen_next::state_cost(cfg_, Model::state_cost(draft), draft);
}

}  // namespace ds4::qwen_next
