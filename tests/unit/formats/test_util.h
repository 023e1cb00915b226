#pragma once
// Small builders for format tests: files are made in memory, written under a temp dir.
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace ds4::test {

inline std::filesystem::path temp_dir(const std::string& name) {
  auto p = std::filesystem::temp_directory_path() / ("ds4_formats_" + name + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(p);
  std::filesystem::create_directories(p);
  return p;
}

inline void write_bytes(const std::filesystem::path& p, const std::vector<uint8_t>& b) {
  std::ofstream(p, std::ios::binary).write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size()));
}

inline std::vector<uint8_t> read_bytes(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

// safetensors bytes from a header and a data section.
// The header is padded with spaces to a multiple of 8, as the safetensors writers do, so
// the data section stays aligned.
inline std::vector<uint8_t> safetensors_bytes(std::string header, const std::vector<uint8_t>& data) {
  while (header.size() % 8) header += ' ';
  std::vector<uint8_t> out(8);
  uint64_t n = header.size();
  std::memcpy(out.data(), &n, 8);
  out.insert(out.end(), header.begin(), header.end());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

template <typename T>
std::vector<uint8_t> as_bytes(const std::vector<T>& v) {
  std::vector<uint8_t> b(v.size() * sizeof(T));
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

}  // namespace ds4::test
