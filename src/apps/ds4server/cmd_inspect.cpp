// ds4server inspect FILE|DIR [--json] [--checksums]: format, metadata, tensors (name, type,
// shape, bytes) and the total. Bad input ends with the reader's message naming file and
// field, exit code 1. --checksums adds an FNV-1a 64 of each tensor's bytes (for tests).
#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "apps/ds4server/commands.h"
#include "core/error.h"
#include "formats/tensor_source.h"

namespace ds4::cli {
namespace {

std::string shape_str(const std::vector<int64_t>& s) {
  std::string r = "{";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "}";
}

uint64_t fnv1a(const void* p, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull;
  const uint8_t* b = static_cast<const uint8_t*>(p);
  for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 0x100000001b3ull;
  return h;
}

// Long arrays (token lists) are summarized in the text view.
std::string brief(const nlohmann::json& v) {
  if (v.is_array() && v.size() > 8) return "[array of " + std::to_string(v.size()) + "]";
  std::string s = v.dump();
  return s.size() > 120 ? s.substr(0, 117) + "..." : s;
}

}  // namespace

int cmd_inspect(const Args& args) {
  std::string path;
  bool json = false, checksums = false;
  for (const std::string& a : args) {
    if (a == "--json") json = true;
    else if (a == "--checksums") checksums = true;
    else if (path.empty() && (a.empty() || a[0] != '-')) path = a;
    else throw InputError("usage: ds4server inspect FILE|DIR [--json] [--checksums]");
  }
  if (path.empty()) throw InputError("usage: ds4server inspect FILE|DIR [--json] [--checksums]");
  auto src = open_tensor_source(path);
  uint64_t total = 0;
  nlohmann::json tensors = nlohmann::json::array();
  for (const TensorInfo& t : src->tensors()) {
    total += t.bytes;
    nlohmann::json j = {{"name", t.name}, {"type", dtype_name(t.type)}, {"shape", t.shape}, {"bytes", t.bytes}};
    if (checksums) j["fnv1a64"] = fnv1a(t.data, t.bytes);
    tensors.push_back(std::move(j));
  }
  if (json) {
    nlohmann::json out = {{"path", path},           {"format", src->format()},         {"metadata", src->metadata()},
                          {"config", src->config()}, {"tensor_count", tensors.size()}, {"total_bytes", total},
                          {"tensors", tensors}};
    std::printf("%s\n", out.dump(1).c_str());
    return 0;
  }
  std::printf("path: %s\nformat: %s\n", path.c_str(), src->format().c_str());
  if (!src->metadata().empty()) {
    std::printf("metadata (%zu keys):\n", src->metadata().size());
    for (auto it = src->metadata().begin(); it != src->metadata().end(); ++it)
      std::printf("  %s = %s\n", it.key().c_str(), brief(*it).c_str());
  }
  std::printf("tensors (%zu):\n", tensors.size());
  for (const auto& t : tensors)
    std::printf("  %-48s %-8s %-24s %zu\n", t["name"].get<std::string>().c_str(), t["type"].get<std::string>().c_str(),
                shape_str(t["shape"].get<std::vector<int64_t>>()).c_str(), t["bytes"].get<size_t>());
  std::printf("total: %llu bytes (%.2f GiB)\n", (unsigned long long)total, double(total) / (1ull << 30));
  return 0;
}

}  // namespace ds4::cli
