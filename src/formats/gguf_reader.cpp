// GGUF reader. Layout (little-endian): magic "GGUF", u32 version, u64 tensor_count,
// u64 kv_count, kv_count x {string key, u32 type, value}, tensor_count x {string name,
// u32 n_dims, u64 ne[n_dims], u32 ggml_type, u64 offset}, padding to `general.alignment`
// (default 32), then the data section. Strings are u64 length + bytes (no terminator).
#include <cstring>
#include <limits>
#include <set>
#include <string>

#include "core/error.h"
#include "formats/gguf.h"
#include "formats/tensor_layout.h"

namespace ds4 {
namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF"
constexpr int kMaxArrayDepth = 8;        // nested arrays deeper than this are not real files
constexpr uint32_t kMaxDims = 4;         // GGML_MAX_DIMS

// GGUF strings are UTF-8; rejecting bad sequences here keeps metadata() safe to serialize.
bool valid_utf8(const std::string& s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  size_t n = s.size(), i = 0;
  while (i < n) {
    unsigned c = p[i];
    int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (len == 0 || i + size_t(len) > n) return false;
    uint32_t cp = len == 1 ? c : c & (0x7F >> len);
    for (int k = 1; k < len; ++k) {
      if ((p[i + size_t(k)] & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (p[i + size_t(k)] & 0x3F);
    }
    static const uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMin[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;  // overlong / surrogate
    i += size_t(len);
  }
  return true;
}

class Cursor {
 public:
  explicit Cursor(const MappedFile& f) : f_(f) {}
  [[noreturn]] void fail(const std::string& field, const std::string& problem) const {
    throw InputError(f_.path() + ": " + field + ": " + problem);
  }
  void need(uint64_t n, const std::string& field) const {
    if (n > f_.size() - pos_)
      fail(field, "truncated (needs " + std::to_string(n) + " bytes at offset " + std::to_string(pos_) +
                      ", file has " + std::to_string(f_.size()) + ")");
  }
  template <typename T>
  T get(const std::string& field) {
    need(sizeof(T), field);
    T v;
    std::memcpy(&v, f_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  std::string str(const std::string& field) {
    uint64_t n = get<uint64_t>(field + " (string length)");
    need(n, field);
    std::string s(reinterpret_cast<const char*>(f_.data() + pos_), size_t(n));
    if (!valid_utf8(s)) fail(field, "string at offset " + std::to_string(pos_) + " is not valid UTF-8");
    pos_ += n;
    return s;
  }
  uint64_t pos() const { return pos_; }
  uint64_t remaining() const { return f_.size() - pos_; }

 private:
  const MappedFile& f_;
  uint64_t pos_ = 0;
};

// Smallest encoded size of one value of type t (used to bound counts before allocating).
uint64_t min_value_bytes(GgufType t) {
  switch (t) {
    case GgufType::U8: case GgufType::I8: case GgufType::BOOL: return 1;
    case GgufType::U16: case GgufType::I16: return 2;
    case GgufType::U32: case GgufType::I32: case GgufType::F32: return 4;
    case GgufType::U64: case GgufType::I64: case GgufType::F64: return 8;
    case GgufType::STRING: return 8;
    case GgufType::ARRAY: return 12;
  }
  return 1;
}

bool valid_type(uint32_t t) { return t <= uint32_t(GgufType::F64); }

GgufValue read_value(Cursor& c, GgufType t, const std::string& field, int depth) {
  GgufValue v;
  v.type = t;
  switch (t) {
    case GgufType::U8: v.value = c.get<uint8_t>(field); break;
    case GgufType::I8: v.value = c.get<int8_t>(field); break;
    case GgufType::U16: v.value = c.get<uint16_t>(field); break;
    case GgufType::I16: v.value = c.get<int16_t>(field); break;
    case GgufType::U32: v.value = c.get<uint32_t>(field); break;
    case GgufType::I32: v.value = c.get<int32_t>(field); break;
    case GgufType::F32: v.value = c.get<float>(field); break;
    case GgufType::U64: v.value = c.get<uint64_t>(field); break;
    case GgufType::I64: v.value = c.get<int64_t>(field); break;
    case GgufType::F64: v.value = c.get<double>(field); break;
    case GgufType::BOOL: {
      uint8_t b = c.get<uint8_t>(field);
      if (b > 1) c.fail(field, "bool value " + std::to_string(b) + " is not 0 or 1");
      v.value = bool(b);
      break;
    }
    case GgufType::STRING: v.value = c.str(field); break;
    case GgufType::ARRAY: {
      if (depth >= kMaxArrayDepth) c.fail(field, "arrays nested deeper than " + std::to_string(kMaxArrayDepth));
      uint32_t et = c.get<uint32_t>(field + " (array type)");
      if (!valid_type(et)) c.fail(field, "unknown array element type " + std::to_string(et));
      v.elem_type = GgufType(et);
      uint64_t n = c.get<uint64_t>(field + " (array length)");
      if (n > c.remaining() / min_value_bytes(v.elem_type))
        c.fail(field, "array length " + std::to_string(n) + " exceeds the file size");
      v.items.reserve(size_t(n));
      for (uint64_t i = 0; i < n; ++i) v.items.push_back(read_value(c, v.elem_type, field, depth + 1));
      break;
    }
  }
  return v;
}

void read_tensor_info(Cursor& c, GgufTensor& t, size_t index) {
  std::string field = "tensor_info[" + std::to_string(index) + "]";
  t.name = c.str(field + ".name");
  field = "tensor '" + t.name + "'";
  uint32_t nd = c.get<uint32_t>(field + ".n_dims");
  if (nd == 0 || nd > kMaxDims) c.fail(field + ".n_dims", "n_dims " + std::to_string(nd) + " not in 1..4");
  std::vector<int64_t> ne(nd);
  uint64_t numel = 1;
  for (uint32_t d = 0; d < nd; ++d) {
    uint64_t n = c.get<uint64_t>(field + ".ne");
    if (n > uint64_t(std::numeric_limits<int64_t>::max()) || __builtin_mul_overflow(numel, n, &numel) ||
        numel > (uint64_t(1) << 50))
      c.fail(field + ".ne", "shape overflows (dim " + std::to_string(d) + " = " + std::to_string(n) + ")");
    ne[d] = int64_t(n);
  }
  uint32_t type = c.get<uint32_t>(field + ".type");
  if (!dtype_from_ggml(type, &t.type)) c.fail(field + ".type", "unknown or unsupported ggml type " + std::to_string(type));
  t.offset = c.get<uint64_t>(field + ".offset");
  t.shape.assign(ne.rbegin(), ne.rend());
  BlockGeometry g = block_geometry(t.type);
  if (ne[0] % g.elements != 0)
    c.fail(field + ".ne", "row length " + std::to_string(ne[0]) + " is not whole " +
                              std::string(dtype_name(t.type)) + " blocks of " + std::to_string(g.elements));
  // numel <= 2^50 and bytes/element <= 8 keep this product far from overflow.
  t.bytes = size_t(numel / uint64_t(g.elements) * uint64_t(g.bytes));
}

}  // namespace

const GgufValue* GgufFile::find(const std::string& key) const {
  for (const auto& kv : kvs)
    if (kv.key == key) return &kv.value;
  return nullptr;
}

GgufFile read_gguf(std::shared_ptr<const MappedFile> file) {
  GgufFile g;
  g.file = file;
  Cursor c(*file);
  if (c.get<uint32_t>("header.magic") != kMagic) c.fail("header.magic", "not a GGUF file (bad magic)");
  g.version = c.get<uint32_t>("header.version");
  if (g.version != 2 && g.version != 3) c.fail("header.version", "unsupported version " + std::to_string(g.version));
  uint64_t n_tensors = c.get<uint64_t>("header.tensor_count");
  uint64_t n_kv = c.get<uint64_t>("header.kv_count");
  if (n_kv > c.remaining() / 12) c.fail("header.kv_count", std::to_string(n_kv) + " exceeds the file size");
  std::set<std::string> keys;
  for (uint64_t i = 0; i < n_kv; ++i) {
    GgufKV kv;
    kv.key = c.str("kv[" + std::to_string(i) + "].key");
    if (!keys.insert(kv.key).second) c.fail("kv '" + kv.key + "'", "duplicate key");
    uint32_t t = c.get<uint32_t>("kv '" + kv.key + "'.type");
    if (!valid_type(t)) c.fail("kv '" + kv.key + "'.type", "unknown value type " + std::to_string(t));
    kv.value = read_value(c, GgufType(t), "kv '" + kv.key + "'", 0);
    g.kvs.push_back(std::move(kv));
  }
  if (const GgufValue* a = g.find("general.alignment")) {
    if (a->type != GgufType::U32) c.fail("general.alignment", "type is not u32");
    uint64_t al = a->value.get<uint64_t>();
    if (al == 0 || (al & (al - 1)) != 0) c.fail("general.alignment", "value " + std::to_string(al) + " is not a power of two");
    g.alignment = al;
  }
  if (n_tensors > c.remaining() / 24) c.fail("header.tensor_count", std::to_string(n_tensors) + " exceeds the file size");
  std::set<std::string> names;
  g.tensors.resize(size_t(n_tensors));
  for (uint64_t i = 0; i < n_tensors; ++i) {
    read_tensor_info(c, g.tensors[i], size_t(i));
    if (!names.insert(g.tensors[i].name).second) c.fail("tensor '" + g.tensors[i].name + "'", "duplicate tensor name");
  }
  uint64_t pos = c.pos();
  g.data_offset = (pos + g.alignment - 1) / g.alignment * g.alignment;
  uint64_t data_size = file->size() >= g.data_offset ? file->size() - g.data_offset : 0;
  for (const GgufTensor& t : g.tensors) {
    std::string field = "tensor '" + t.name + "'.offset";
    if (t.offset % g.alignment != 0)
      c.fail(field, "offset " + std::to_string(t.offset) + " is not a multiple of alignment " + std::to_string(g.alignment));
    if (t.offset > data_size || t.bytes > data_size - t.offset)
      c.fail(field, "data [" + std::to_string(t.offset) + ", +" + std::to_string(t.bytes) + ") runs past the end of the file (data section has " +
                        std::to_string(data_size) + " bytes)");
  }
  std::vector<TensorRange> ranges;
  for (const GgufTensor& t : g.tensors) ranges.push_back({t.name, t.offset, t.offset + t.bytes});
  if (std::string e = tensor_layout_error(std::move(ranges), g.alignment); !e.empty()) c.fail("tensor data", e);
  return g;
}

nlohmann::json GgufValue::to_json() const {
  if (type != GgufType::ARRAY) return value;
  nlohmann::json a = nlohmann::json::array();
  for (const auto& it : items) a.push_back(it.to_json());
  return a;
}

const char* gguf_type_name(GgufType t) {
  static const char* names[] = {"u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64"};
  return uint32_t(t) <= 12 ? names[uint32_t(t)] : "?";
}

uint32_t ggml_type_id(DType t) {
  switch (t) {
    case DType::F32: return 0;
    case DType::F16: return 1;
    case DType::Q8_0: return 8;
    case DType::Q2_K: return 10;
    case DType::Q4_K: return 12;
    case DType::IQ2_XXS: return 16;
    case DType::I8: return 24;
    case DType::I32: return 26;
    case DType::I64: return 27;
    case DType::BF16: return 30;
    default: throw Error("dtype " + std::string(dtype_name(t)) + " has no GGUF type");
  }
}

bool dtype_from_ggml(uint32_t id, DType* out) {
  switch (id) {
    case 0: *out = DType::F32; return true;
    case 1: *out = DType::F16; return true;
    case 8: *out = DType::Q8_0; return true;
    case 10: *out = DType::Q2_K; return true;
    case 12: *out = DType::Q4_K; return true;
    case 16: *out = DType::IQ2_XXS; return true;
    case 24: *out = DType::I8; return true;
    case 26: *out = DType::I32; return true;
    case 27: *out = DType::I64; return true;
    case 30: *out = DType::BF16; return true;
    default: return false;
  }
}

}  // namespace ds4
