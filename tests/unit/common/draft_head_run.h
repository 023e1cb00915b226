#pragma once
// The gtest-free part of the draft-head test scaffolding (draft_head_test_util.h includes it;
// the CUDA tests in tests/cuda, plain executables without GoogleTest, include it directly):
// a temporary trunk + head directory and one greedy run through engine::generate_greedy.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/speculative.h"
#include "models/draft_head.h"
#include "models/model.h"

namespace ds4::draft_test {

// A fresh directory <tmp>/<tag>_<pid> with the trunk's config.json and model.safetensors and
// `head_file` under its own name. `extra_config` (a JSON file, or empty) is merged into
// config.json: DSpark ships its settings apart from the trunk's. The caller removes it.
inline std::string trunk_with_head_dir(const std::string& tag, const std::string& trunk_dir,
                                       const std::string& head_file, const std::string& extra_config = "") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / (tag + "_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  for (const char* f : {"config.json", "model.safetensors"})
    fs::copy_file(fs::path(trunk_dir) / f, dir / f, fs::copy_options::overwrite_existing);
  const fs::path head(head_file);
  fs::copy_file(head, dir / head.filename(), fs::copy_options::overwrite_existing);
  if (!extra_config.empty()) {
    nlohmann::json cfg = nlohmann::json::parse(std::ifstream(dir / "config.json"));
    cfg.update(nlohmann::json::parse(std::ifstream(extra_config)));
    std::ofstream(dir / "config.json") << cfg.dump(2);
  }
  return dir.string();
}

struct SpecRun {
  std::vector<int32_t> tokens;
  engine::SpecStats stats;
};

// 24 greedy tokens after `prompt` through engine::generate_greedy (depth 0: plain AR). With
// `force`, the drafts are overwritten by the AR tokens after the pending one (its position is
// the state position), so every draft is accepted and the bonus row is used.
inline SpecRun generate(Model& m, const std::vector<int32_t>& prompt, int depth, const std::vector<int32_t>* force,
                        int32_t eos) {
  SpecRun r;
  auto st = m.new_state();
  if (depth > 0) m.draft_head()->enable_draft(*st);
  auto logits = m.prefill(*st, prompt);
  std::function<void(std::vector<int32_t>&)> corrupt;
  if (force)
    corrupt = [&](std::vector<int32_t>& d) {
      const size_t at = size_t(st->position()) - prompt.size() + 1;
      for (size_t k = 0; k < d.size() && at + k < force->size(); ++k) d[k] = (*force)[at + k];
    };
  const int32_t stop[] = {eos};
  r.tokens = engine::generate_greedy(m, st, logits, 24, stop, depth, &r.stats, corrupt);
  return r;
}

}  // namespace ds4::draft_test
