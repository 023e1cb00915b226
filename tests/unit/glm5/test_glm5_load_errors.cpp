// Bad checkpoints fail at load with an InputError naming the file and the tensor/field.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "golden.h"
#include "models/model.h"

namespace ds4::glm5_test {
namespace {

namespace fs = std::filesystem;

// A copy of the tiny model dir whose config.json is edited by `edit`.
std::string variant(const std::string& name, const std::function<void(nlohmann::json&)>& edit) {
  fs::path dir = fs::temp_directory_path() / ("glm5_" + name + "_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  fs::copy_file(model_dir() + "/model.safetensors", dir / "model.safetensors", fs::copy_options::overwrite_existing);
  std::ifstream in(model_dir() + "/config.json");
  nlohmann::json j = nlohmann::json::parse(in);
  edit(j);
  std::ofstream(dir / "config.json") << j.dump();
  return dir.string();
}

std::string load_error(const std::string& dir) {
  try {
    load_model(dir);
  } catch (const InputError& e) {
    fs::remove_all(dir);
    return e.what();
  }
  fs::remove_all(dir);
  return "";
}

TEST(Glm5LoadErrors, MissingTensorIsNamed) {
  const auto msg = load_error(variant("layers", [](nlohmann::json& j) {
    j["num_hidden_layers"] = 7;
    j["layer_types"].push_back("linear_attention");
    j["mlp_layer_types"].push_back("sparse");
    j["indexer_types"].push_back("full");
  }));
  EXPECT_NE(msg.find("model.layers.6."), std::string::npos) << msg;
}

TEST(Glm5LoadErrors, ShapeMismatchIsNamed) {
  const auto msg = load_error(variant("shape", [](nlohmann::json& j) { j["kv_lora_rank"] = 16; }));
  EXPECT_NE(msg.find("kv_a_proj_with_mqa"), std::string::npos) << msg;
}

TEST(Glm5LoadErrors, BadConfigFieldIsNamed) {
  const auto msg = load_error(variant("cfg", [](nlohmann::json& j) { j["index_topk"] = 30; }));
  EXPECT_NE(msg.find("index_topk"), std::string::npos) << msg;
  EXPECT_NE(msg.find("config.json"), std::string::npos) << msg;
}

}  // namespace
}  // namespace ds4::glm5_test
