#pragma once
// Small pieces the engine-level tests share: a chat message and a per-process temp folder.
#include <unistd.h>

#include <filesystem>
#include <string>

#include "tokenizer/chat_template.h"

namespace ds4::test {

inline tok::Message msg(std::string role, std::string s) {
  tok::Message m;
  m.role = std::move(role);
  m.content = std::move(s);
  return m;
}

// A fresh folder under the system temp dir (name + pid, so parallel test binaries never share
// one), removed on destruction.
struct TempDir {
  std::string path;
  explicit TempDir(const std::string& name) {
    namespace fs = std::filesystem;
    path = (fs::temp_directory_path() / (name + "-" + std::to_string(::getpid()))).string();
    fs::remove_all(path);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
};

}  // namespace ds4::test
