#pragma once
// A tiny test model of one family, its draft head file (empty: none) merged into a temporary
// folder first, with the extra config (DSpark's settings) when given; 2 threads; max_context:
// LoadOptions::max_context (0: the model's).
#include <filesystem>
#include <memory>
#include <string>

#include "draft_head_run.h"
#include "models/model.h"

namespace ds4::test {

inline std::unique_ptr<Model> load_family_model(const std::string& tag, const std::string& dir,
                                                const std::string& head, const std::string& extra = "",
                                                int64_t max_context = 0) {
  LoadOptions o;
  o.threads = 2;
  o.max_context = max_context;
  if (head.empty()) return load_model(dir, o);
  const std::string merged = draft_test::trunk_with_head_dir("ds4-model-" + tag, dir, head, extra);
  auto m = load_model(merged, o);
  std::filesystem::remove_all(merged);
  return m;
}

}  // namespace ds4::test
