#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "engine/settings.h"

using namespace ds4::engine;

TEST(Settings, YamlCliRoundTrip) {
  Settings s;
  load_settings_yaml(s, "model: /m\nsampler:\n  temperature: 0.7\n  top_k: 40\nserver:\n  port: 9000\n", "c.yaml");
  apply_cli(s, {"--port", "9001", "--sampler.seed=7", "--thinking", "off", "--backend", "cuda", "--print-config"},
            {"--print-config"});
  EXPECT_EQ(s.model, "/m");
  EXPECT_EQ(s.backend, "cuda");
  EXPECT_EQ(*s.temperature, 0.7);
  EXPECT_EQ(*s.top_k, 40);
  EXPECT_EQ(s.port, 9001);
  EXPECT_EQ(*s.seed, 7u);
  EXPECT_EQ(s.thinking, "off");
  EXPECT_FALSE(s.top_p.has_value());
  Settings back;
  load_settings_yaml(back, settings_yaml(s), "receipt");
  EXPECT_EQ(settings_yaml(back), settings_yaml(s));
  EXPECT_EQ(*back.temperature, 0.7);
  EXPECT_FALSE(back.top_p.has_value());
  EXPECT_EQ(back.api_key, "");
  EXPECT_NE(settings_yaml(s).find("top_p: auto"), std::string::npos);
  s.top_p = 0.95;
  s.api_key = "secret";
  EXPECT_NE(settings_yaml(s).find("top_p: 0.95\n"), std::string::npos);
  EXPECT_NE(settings_yaml(s).find("api_key: secret"), std::string::npos);
  EXPECT_EQ(settings_yaml(s, true).find("secret"), std::string::npos);
}

TEST(Settings, ErrorsNameLineAndKey) {
  Settings s;
  try {
    load_settings_yaml(s, "model: x\nsampler:\n  temprature: 1\n", "c.yaml");
    FAIL();
  } catch (const ds4::InputError& e) {
    EXPECT_EQ(std::string(e.what()), "c.yaml:3: unknown key 'sampler.temprature'");
  }
  try {
    load_settings_yaml(s, "server:\n  port: 70000\n", "c.yaml");
    FAIL();
  } catch (const ds4::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("c.yaml:2: server.port = '70000'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(apply_cli(s, {"--top-p", "2"}, {}), ds4::InputError);
  EXPECT_THROW(apply_cli(s, {"--nope", "1"}, {}), ds4::InputError);
  EXPECT_THROW(apply_cli(s, {"--thinking", "maybe"}, {}), ds4::InputError);
  EXPECT_THROW(apply_cli(s, {"--backend", "gpu"}, {}), ds4::InputError);
  EXPECT_EQ(Settings{}.backend, "auto");  // issue #10: auto is the default
  apply_cli(s, {"--backend", "auto"}, {});
  EXPECT_EQ(s.backend, "auto");
  apply_cli(s, {"--top-p", "0.5"}, {});
  EXPECT_EQ(*s.top_p, 0.5);
}

TEST(Settings, CacheSnapshotEvery) {
  Settings s;
  EXPECT_NE(settings_yaml(s).find("  snapshot_every: auto\n"), std::string::npos);
  load_settings_yaml(s, "cache:\n  snapshot_every: 2048\n", "c.yaml");
  EXPECT_EQ(s.cache_snapshot_every, 2048);
  apply_cli(s, {"--snapshot_every", "off"}, {});
  EXPECT_EQ(s.cache_snapshot_every, -1);
  Settings back;
  load_settings_yaml(back, settings_yaml(s), "receipt");
  EXPECT_EQ(back.cache_snapshot_every, -1);
  try {
    load_settings_yaml(s, "cache:\n  snapshot_every: 0\n", "c.yaml");
    FAIL();
  } catch (const ds4::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("c.yaml:2: cache.snapshot_every = '0'"), std::string::npos) << e.what();
  }
}

namespace {
// The message of the InputError `f` throws ("" when it throws none).
template <class F>
std::string error_of(F f) {
  try {
    f();
  } catch (const ds4::InputError& e) {
    return e.what();
  }
  return "";
}
}  // namespace

// Robustness sweep of the settings file and the command line: values that used to load as
// something else, or silently, are errors naming the file, line and key.
TEST(Settings, DuplicateAndComplexYamlKeysAreErrors) {
  Settings s;
  EXPECT_EQ(error_of([&] { load_settings_yaml(s, "power: 50\npower: 60\n", "c.yaml"); }),
            "c.yaml:2: duplicate key 'power' (first at line 1)");
  EXPECT_EQ(error_of([&] { load_settings_yaml(s, "server:\n  port: 1\nserver:\n  host: x\n", "c.yaml"); }),
            "c.yaml:3: duplicate key 'server' (first at line 1)");
  EXPECT_EQ(error_of([&] { load_settings_yaml(s, "server.port: 1\nserver:\n  port: 2\n", "c.yaml"); }),
            "c.yaml:3: duplicate key 'server.port' (first at line 1)");
  EXPECT_EQ(error_of([&] { load_settings_yaml(s, "? [a, b]\n: 1\n", "c.yaml"); }),
            "c.yaml:1: a key must be a plain name");
}

TEST(Settings, NumbersMustBePlainDecimals) {
  Settings s;
  EXPECT_EQ(error_of([&] {
              apply_cli(s, {"--seed", " -1"}, {});
            }),
            "--seed: sampler.seed = ' -1': not a non-negative integer");  // was 18446744073709551615
  EXPECT_EQ(error_of([&] {
              apply_cli(s, {"--temperature", "0x10"}, {});
            }),
            "--temperature: sampler.temperature = '0x10': not a number");  // was 16
  EXPECT_EQ(error_of([&] { apply_cli(s, {"--power", " 50"}, {}); }), "--power: power = ' 50': not an integer");
  EXPECT_EQ(error_of([&] {
              apply_cli(s, {"--port", "99999999999999999999"}, {});
            }),
            "--port: server.port = '99999999999999999999': must be in [0, 65535]");
  EXPECT_EQ(error_of([&] {
              apply_cli(s, {"--checkpoint.budget_bytes", "0"}, {});
            }),
            "--checkpoint.budget_bytes: checkpoint.budget_bytes = '0': must be in [1, 1125899906842624]");
  apply_cli(s, {"--seed", "18446744073709551615", "--temperature", "1e-3", "--power", "7"}, {});
  EXPECT_EQ(*s.seed, 18446744073709551615u);
  EXPECT_EQ(*s.temperature, 1e-3);
  EXPECT_EQ(s.power, 7);
}

TEST(Settings, ConfigFileSpellingsAndDirectories) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("ds4_settings_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string file = (dir / "c.yaml").string();
  std::ofstream(file) << "power: 42\n";
  Settings a, b;
  apply_cli(a, {"--config", file}, {});
  apply_cli(b, {"--config=" + file}, {});  // was skipped without a word
  EXPECT_EQ(a.power, 42);
  EXPECT_EQ(b.power, 42);
  Settings c;
  // A directory read as an empty config before.
  EXPECT_EQ(error_of([&] {
              apply_cli(c, {"--config", dir.string()}, {});
            }),
            "config file " + dir.string() + " is a directory");
  EXPECT_EQ(error_of([&] { apply_cli(c, {"--config=" + (dir / "none.yaml").string()}, {}); }),
            "cannot read config file " + (dir / "none.yaml").string());
  fs::remove_all(dir);
}
