// Explicit registry of model families: each family folder provides a probe (does this
// path hold my family?) and a loader. Adding a family = one line in kFamilies.
#include "models/registry.h"

#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "core/error.h"
#include "formats/tensor_source.h"
#include "models/deepseek_v4/model.h"
#include "models/model.h"
#include "models/qwen_next/model.h"

namespace ds4 {
namespace {

struct Family {
  const char* name;
  std::function<bool(const std::string&)> probe;
  std::function<std::unique_ptr<Model>(const std::string&, const LoadOptions&)> load;
};

const std::vector<Family>& families() {
  static const std::vector<Family> kFamilies = {
      {"qwen_next", qwen_next::probe, qwen_next::load},
      {"deepseek_v4", deepseek_v4::probe, deepseek_v4::load},
      {"glm5", glm5::probe, glm5::load},
  };
  return kFamilies;
}

}  // namespace

namespace {
// A model directory is recognized by its config.json, and the probes treat a missing,
// unreadable or broken one as "not my family": say what is wrong with the file instead of
// that no family recognizes the directory.
void check_config_json(const std::string& dir) {
  namespace fs = std::filesystem;
  const std::string cfg = (fs::path(dir) / "config.json").string();
  std::error_code ec;
  if (!fs::exists(cfg, ec)) throw InputError(cfg + ": not found (a model directory needs its config.json)");
  if (!fs::is_regular_file(cfg, ec)) throw InputError(cfg + ": not a regular file");
  if (!read_json_file(cfg).is_object()) throw InputError(cfg + ": not a JSON object");
}
}  // namespace

std::unique_ptr<Model> load_model(const std::string& path, const LoadOptions& options) {
  if (!std::filesystem::exists(path)) throw InputError("model path does not exist: " + path);
  if (std::filesystem::is_directory(path)) check_config_json(path);
  for (const auto& f : families()) {
    try {
      if (f.probe(path)) return f.load(path, options);
    } catch (const nlohmann::json::exception& e) {
      // A config value of a type the family did not expect, on a key the shared checks
      // (formats/config_checks.h, which name the key) do not cover: at least name the model.
      throw InputError(path + ": " + f.name + " config: a value has an unexpected type (" + e.what() + ")");
    }
  }
  throw InputError("no model family recognizes " + path +
                   " (expected config.json model_type or GGUF general.architecture of a known family)");
}

}  // namespace ds4
