// StateCost (model.h): the bound and the default measurement.
#include <algorithm>
#include <cmath>

#include "core/host_memory.h"
#include "models/draft_head.h"
#include "models/model.h"

namespace ds4 {

size_t StateCost::at(int64_t positions) const {
  return size_t(std::ceil(fixed + per_token * double(std::max<int64_t>(0, positions))));
}

StateCost Model::state_cost(bool draft) {
  auto st = new_state();
  if (draft && draft_head()) draft_head()->enable_draft(*st);
  return {double(st->bytes()), 0.0};
}

size_t Model::state_memory_available() { return host_memory_available(); }

}  // namespace ds4
