#pragma once
// Shared by the CUDA benches' per-op profiles (issue #23): a model's {op name -> GPU ms}
// summed over n tokens (or chunks), printed per unit as a markdown table, largest first.
#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace ds4::bench {

inline void print_op_table(const std::map<std::string, double>& op_ms, int n, const char* unit) {
  std::vector<std::pair<double, std::string>> rows;
  double total = 0;
  for (const auto& [name, ms] : op_ms) rows.push_back({ms / n, name}), total += ms / n;
  std::sort(rows.rbegin(), rows.rend());
  std::printf("| op (all layers) | ms/%s | share |\n|---|---|---|\n", unit);
  for (const auto& [ms, name] : rows) std::printf("| %s | %.3f | %.1f%% |\n", name.c_str(), ms, 100 * ms / total);
  std::printf("| total | %.3f | |\n", total);
  std::fflush(stdout);
}

}  // namespace ds4::bench
