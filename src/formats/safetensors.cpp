#include "formats/safetensors.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <set>

#include "core/error.h"
#include "formats/tensor_layout.h"

namespace ds4 {
namespace {

constexpr uint64_t kMaxHeader = 100ull << 20;  // the format's own limit (100 MB)
constexpr int kMaxJsonDepth = 64;              // real headers nest 3 deep

[[noreturn]] void fail(const MappedFile& f, const std::string& field, const std::string& problem) {
  throw InputError(f.path() + ": " + field + ": " + problem);
}

// nlohmann's parser recurses per nesting level; reject absurd nesting before parsing so a
// hostile header cannot exhaust the stack.
void check_depth(const MappedFile& f, const char* p, size_t n) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < n; ++i) {
    char ch = p[i];
    if (in_string) {
      if (ch == '\\') ++i;
      else if (ch == '"') in_string = false;
    } else if (ch == '"') {
      in_string = true;
    } else if (ch == '{' || ch == '[') {
      if (++depth > kMaxJsonDepth) fail(f, "header", "JSON nested deeper than " + std::to_string(kMaxJsonDepth));
    } else if (ch == '}' || ch == ']') {
      --depth;
    }
  }
}

TensorInfo parse_entry(const MappedFile& f, const std::string& name, const nlohmann::json& e,
                       const uint8_t* data, uint64_t data_size) {
  std::string field = "tensor '" + name + "'";
  if (!e.is_object()) fail(f, field, "entry is not an object");
  TensorInfo t;
  t.name = name;
  t.file = f.path();
  auto dt = e.find("dtype");
  if (dt == e.end() || !dt->is_string()) fail(f, field + ".dtype", "missing or not a string");
  if (!dtype_from_safetensors(dt->get<std::string>(), &t.type))
    fail(f, field + ".dtype", "unknown dtype '" + dt->get<std::string>() + "'");
  auto sh = e.find("shape");
  if (sh == e.end() || !sh->is_array() || sh->size() > 8) fail(f, field + ".shape", "missing, not an array, or more than 8 dims");
  uint64_t numel = 1;
  for (const auto& d : *sh) {
    if (!d.is_number_unsigned()) fail(f, field + ".shape", "dimension " + d.dump() + " is not a non-negative integer");
    uint64_t n = d.get<uint64_t>();
    if (n > uint64_t(std::numeric_limits<int64_t>::max()) || __builtin_mul_overflow(numel, n, &numel) ||
        numel > (uint64_t(1) << 50))
      fail(f, field + ".shape", "shape " + sh->dump() + " overflows");
    t.shape.push_back(int64_t(n));
  }
  auto off = e.find("data_offsets");
  if (off == e.end() || !off->is_array() || off->size() != 2 || !(*off)[0].is_number_unsigned() ||
      !(*off)[1].is_number_unsigned())
    fail(f, field + ".data_offsets", "missing or not two non-negative integers");
  uint64_t b = (*off)[0].get<uint64_t>(), end = (*off)[1].get<uint64_t>();
  if (b > end || end > data_size)
    fail(f, field + ".data_offsets", "[" + std::to_string(b) + ", " + std::to_string(end) + ") is outside the data section of " +
                                         std::to_string(data_size) + " bytes");
  uint64_t want = numel * uint64_t(block_geometry(t.type).bytes);  // plain dtypes only: 1 element per block
  if (end - b != want)
    fail(f, field + ".data_offsets", "holds " + std::to_string(end - b) + " bytes but shape " + sh->dump() + " of " +
                                         std::string(dtype_name(t.type)) + " needs " + std::to_string(want));
  t.data = data + b;
  t.bytes = size_t(want);
  return t;
}

}  // namespace

bool dtype_from_safetensors(const std::string& s, DType* out) {
  static const std::pair<const char*, DType> table[] = {
      {"F32", DType::F32}, {"F16", DType::F16}, {"BF16", DType::BF16}, {"I8", DType::I8},
      {"U8", DType::U8},   {"I32", DType::I32}, {"U32", DType::U32},   {"I64", DType::I64},
      {"F8_E4M3", DType::F8_E4M3},
  };
  for (const auto& [name, t] : table)
    if (s == name) {
      *out = t;
      return true;
    }
  return false;
}

SafetensorsFile read_safetensors(std::shared_ptr<const MappedFile> file) {
  const MappedFile& f = *file;
  SafetensorsFile st;
  st.file = file;
  st.metadata = nlohmann::json::object();
  if (f.size() < 8) fail(f, "header length", "truncated (file has " + std::to_string(f.size()) + " bytes)");
  uint64_t n;
  std::memcpy(&n, f.data(), 8);
  if (n > kMaxHeader) fail(f, "header length", std::to_string(n) + " exceeds the 100 MB limit");
  if (n > f.size() - 8) fail(f, "header length", std::to_string(n) + " runs past the end of the file (" + std::to_string(f.size()) + " bytes)");
  const char* hp = reinterpret_cast<const char*>(f.data() + 8);
  check_depth(f, hp, size_t(n));
  // Duplicate top-level keys would silently overwrite each other in a JSON object.
  std::set<std::string> seen;
  std::string dup;
  auto cb = [&](int depth, nlohmann::json::parse_event_t ev, nlohmann::json& parsed) {
    if (ev == nlohmann::json::parse_event_t::key && depth == 1 && parsed.is_string() &&
        !seen.insert(parsed.get<std::string>()).second && dup.empty())
      dup = parsed.get<std::string>();
    return true;
  };
  nlohmann::json h;
  try {
    h = nlohmann::json::parse(hp, hp + n, cb);
  } catch (const nlohmann::json::exception& e) {
    fail(f, "header", std::string("invalid JSON: ") + e.what());
  }
  if (!dup.empty()) fail(f, "tensor '" + dup + "'", "duplicate tensor name");
  if (!h.is_object()) fail(f, "header", "is not a JSON object");
  const uint8_t* data = f.data() + 8 + n;
  uint64_t data_size = f.size() - 8 - n;
  for (auto it = h.begin(); it != h.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (!it->is_object()) fail(f, "__metadata__", "is not an object");
      st.metadata = *it;
      continue;
    }
    st.tensors.push_back(parse_entry(f, it.key(), *it, data, data_size));
  }
  std::vector<TensorRange> ranges;
  for (const TensorInfo& t : st.tensors) {
    const uint64_t b = uint64_t(static_cast<const uint8_t*>(t.data) - data);
    ranges.push_back({t.name, b, b + t.bytes});
  }
  if (std::string e = tensor_layout_error(std::move(ranges)); !e.empty()) fail(f, "tensor data", e);
  // Header order is JSON-object order (sorted); order by offset to match the file layout.
  std::stable_sort(st.tensors.begin(), st.tensors.end(),
                   [](const TensorInfo& a, const TensorInfo& b) { return a.data < b.data; });
  return st;
}

}  // namespace ds4
