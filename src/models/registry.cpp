// Explicit registry of model families: each family folder provides a probe (does this
// path hold my family?) and a loader. Adding a family = one line in kFamilies.
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "core/error.h"
#include "models/model.h"
#include "models/registry.h"
#include "models/qwen_next/model.h"
#include "models/deepseek_v4/model.h"

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

std::unique_ptr<Model> load_model(const std::string& path, const LoadOptions& options) {
  if (!std::filesystem::exists(path)) throw InputError("model path does not exist: " + path);
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
