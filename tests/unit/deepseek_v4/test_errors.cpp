// Bad model inputs fail loudly with the file, field or tensor named.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "golden.h"
#include "models/model.h"

using namespace ds4_test;
namespace fs = std::filesystem;

namespace {
// A copy of the tiny model dir with config.json edited by `edit`.
struct EditedModel {
  fs::path dir;
  template <typename F>
  explicit EditedModel(F edit) {
    dir = fs::temp_directory_path() / ("ds4_dsv4_bad_" + std::to_string(::getpid()));
    fs::create_directories(dir);
    fs::copy_file(kModelDir + "/model.safetensors", dir / "model.safetensors", fs::copy_options::overwrite_existing);
    std::ifstream in(kModelDir + "/config.json");
    nlohmann::json c = nlohmann::json::parse(in);
    edit(c);
    std::ofstream(dir / "config.json") << c.dump();
  }
  ~EditedModel() { fs::remove_all(dir); }
};

std::string load_error(const fs::path& p) {
  try {
    ds4::load_model(p.string());
  } catch (const ds4::InputError& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST(DeepseekV4Errors, BadConfigFieldsAreNamed) {
  {
    EditedModel m([](nlohmann::json& c) { c["o_groups"] = 3; });
    EXPECT_NE(load_error(m.dir).find("o_groups"), std::string::npos);
  }
  {
    EditedModel m([](nlohmann::json& c) { c["layer_types"][2] = "dense_attention"; });
    EXPECT_NE(load_error(m.dir).find("dense_attention"), std::string::npos);
  }
  {
    EditedModel m([](nlohmann::json& c) { c.erase("index_topk"); });
    EXPECT_NE(load_error(m.dir).find("index_topk"), std::string::npos);
  }
}

TEST(DeepseekV4Errors, ShapeMismatchNamesTheTensor) {
  // q_lora_rank 16 in the config no longer matches the 32-row q_a_proj
  EditedModel m([](nlohmann::json& c) { c["q_lora_rank"] = 16; });
  const std::string e = load_error(m.dir);
  EXPECT_NE(e.find("q_a_proj"), std::string::npos) << e;
}
