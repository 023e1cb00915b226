// Registry entry points: recognize a Qwen3.8 Flash Next checkpoint and load it.
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "models/qwen_next/model.h"

namespace ds4::qwen_next {

namespace {
bool is_family(const std::string& model_type) {
  return model_type == "qwen4_exp" || model_type == "qwen4_exp_text";
}
}  // namespace

bool probe(const std::string& path) {
  namespace fs = std::filesystem;
  if (fs::is_directory(path)) {
    std::ifstream f(fs::path(path) / "config.json");
    if (!f) return false;
    const auto j = nlohmann::json::parse(f, nullptr, false);
    if (j.is_discarded() || !j.is_object()) return false;
    return is_family(j.value("model_type", std::string())) ||
           (j.contains("text_config") && j["text_config"].is_object() &&
            is_family(j["text_config"].value("model_type", std::string())));
  }
  if (path.size() >= 5 && path.substr(path.size() - 5) == ".gguf") {
    auto src = open_tensor_source(path);
    const auto& m = src->metadata();
    return m.contains("general.architecture") && m["general.architecture"].is_string() &&
           is_family(m["general.architecture"].get<std::string>());
  }
  return false;
}

std::unique_ptr<Model> load(const std::string& path, const LoadOptions& opt) {
  return std::make_unique<QwenNextModel>(open_tensor_source(path), opt);
}

}  // namespace ds4::qwen_next
