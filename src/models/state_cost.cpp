// StateCost (model.h): the bound and the default measurement.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>
#include <string>

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

size_t Model::state_memory_available() {
  std::ifstream in("/proc/meminfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("MemAvailable:", 0) != 0) continue;
    std::istringstream s(line.substr(13));
    size_t kib = 0;
    s >> kib;
    return kib << 10;
  }
  return 0;
}

}  // namespace ds4
