// Streaming GGUF writer: the header (metadata + tensor infos with precomputed aligned
// offsets) goes out first, then tensor bytes as the caller produces them, so a converter
// never holds more than one tensor in memory.
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <set>

#include "core/error.h"
#include "formats/gguf.h"

namespace ds4 {
namespace {

void put(std::FILE* f, const void* p, size_t n, const std::string& path) {
  if (n && std::fwrite(p, 1, n, f) != n) throw Error(path + ": write failed");
}
template <typename T>
void put_pod(std::FILE* f, T v, const std::string& path) { put(f, &v, sizeof v, path); }
void put_str(std::FILE* f, const std::string& s, const std::string& path) {
  put_pod<uint64_t>(f, s.size(), path);
  put(f, s.data(), s.size(), path);
}

void put_value(std::FILE* f, const GgufValue& v, const std::string& path) {
  const nlohmann::json& j = v.value;
  switch (v.type) {
    case GgufType::U8: put_pod(f, j.get<uint8_t>(), path); break;
    case GgufType::I8: put_pod(f, j.get<int8_t>(), path); break;
    case GgufType::U16: put_pod(f, j.get<uint16_t>(), path); break;
    case GgufType::I16: put_pod(f, j.get<int16_t>(), path); break;
    case GgufType::U32: put_pod(f, j.get<uint32_t>(), path); break;
    case GgufType::I32: put_pod(f, j.get<int32_t>(), path); break;
    case GgufType::F32: put_pod(f, j.get<float>(), path); break;
    case GgufType::U64: put_pod(f, j.get<uint64_t>(), path); break;
    case GgufType::I64: put_pod(f, j.get<int64_t>(), path); break;
    case GgufType::F64: put_pod(f, j.get<double>(), path); break;
    case GgufType::BOOL: put_pod<uint8_t>(f, j.get<bool>() ? 1 : 0, path); break;
    case GgufType::STRING: put_str(f, j.get<std::string>(), path); break;
    case GgufType::ARRAY:
      put_pod<uint32_t>(f, uint32_t(v.elem_type), path);
      put_pod<uint64_t>(f, v.items.size(), path);
      for (const GgufValue& it : v.items) {
        if (it.type != v.elem_type) throw Error(path + ": array element type does not match the array's type");
        put_value(f, it, path);
      }
      break;
  }
}

uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

void put_zeros(std::FILE* f, uint64_t n, const std::string& path) {
  static const char zeros[256] = {};
  while (n) {
    size_t k = size_t(std::min<uint64_t>(n, sizeof zeros));
    put(f, zeros, k, path);
    n -= k;
  }
}

}  // namespace

GgufWriter::GgufWriter(std::string path, uint64_t alignment) : path_(std::move(path)), alignment_(alignment) {
  if (alignment == 0 || (alignment & (alignment - 1))) throw Error(path_ + ": alignment must be a power of two");
  if (alignment != 32) set("general.alignment", GgufValue::scalar(GgufType::U32, uint32_t(alignment)));
}

GgufWriter::~GgufWriter() {
  if (f_) std::fclose(f_);
}

void GgufWriter::set(const std::string& key, GgufValue v) {
  if (header_done_) throw Error(path_ + ": metadata '" + key + "' set after tensor data started");
  for (GgufKV& kv : kvs_)
    if (kv.key == key) {
      kv.value = std::move(v);
      return;
    }
  kvs_.push_back({key, std::move(v)});
}

void GgufWriter::add_tensor(const std::string& name, DType type, const std::vector<int64_t>& shape) {
  if (header_done_) throw Error(path_ + ": tensor '" + name + "' added after tensor data started");
  if (shape.empty() || shape.size() > 4) throw Error(path_ + ": tensor '" + name + "': 1..4 dims required");
  for (const GgufTensor& t : tensors_)
    if (t.name == name) throw Error(path_ + ": tensor '" + name + "' added twice");
  GgufTensor t;
  t.name = name;
  t.type = type;
  t.shape = shape;
  int64_t rows = 1;
  for (size_t i = 0; i + 1 < shape.size(); ++i) rows *= shape[i];
  t.bytes = size_t(rows * row_bytes(type, shape.back()));
  t.offset = align_up(data_bytes_, alignment_);
  data_bytes_ = t.offset + t.bytes;
  tensors_.push_back(std::move(t));
}

void GgufWriter::write_header() {
  f_ = std::fopen(path_.c_str(), "wb");
  if (!f_) throw Error(path_ + ": cannot create: " + std::strerror(errno));
  put_pod<uint32_t>(f_, 0x46554747, path_);
  put_pod<uint32_t>(f_, 3, path_);
  put_pod<uint64_t>(f_, tensors_.size(), path_);
  put_pod<uint64_t>(f_, kvs_.size(), path_);
  for (const GgufKV& kv : kvs_) {
    put_str(f_, kv.key, path_);
    put_pod<uint32_t>(f_, uint32_t(kv.value.type), path_);
    put_value(f_, kv.value, path_);
  }
  for (const GgufTensor& t : tensors_) {
    put_str(f_, t.name, path_);
    put_pod<uint32_t>(f_, uint32_t(t.shape.size()), path_);
    for (auto it = t.shape.rbegin(); it != t.shape.rend(); ++it) put_pod<uint64_t>(f_, uint64_t(*it), path_);
    put_pod<uint32_t>(f_, ggml_type_id(t.type), path_);
    put_pod<uint64_t>(f_, t.offset, path_);
  }
  uint64_t pos = uint64_t(std::ftell(f_));
  put_zeros(f_, align_up(pos, alignment_) - pos, path_);
  header_done_ = true;
  current_ = 0;
  written_in_current_ = 0;
}

void GgufWriter::write(const void* data, size_t bytes) { append(static_cast<const uint8_t*>(data), bytes); }

void GgufWriter::write_zeros(size_t bytes) { append(nullptr, bytes); }

// Shared by write (p = data) and write_zeros (p = nullptr: seek forward, leaving a hole).
void GgufWriter::append(const uint8_t* p, size_t bytes) {
  if (!header_done_) write_header();
  while (bytes > 0) {
    while (current_ < tensors_.size() && written_in_current_ == tensors_[current_].bytes) {
      ++current_;
      written_in_current_ = 0;
    }
    if (current_ >= tensors_.size()) throw Error(path_ + ": more tensor bytes written than declared");
    const GgufTensor& t = tensors_[current_];
    if (written_in_current_ == 0) {  // zero padding up to this tensor's aligned offset
      put_zeros(f_, t.offset - data_pos_, path_);
      data_pos_ = t.offset;
    }
    size_t k = std::min(bytes, t.bytes - written_in_current_);
    if (p) {
      put(f_, p, k, path_);
      p += k;
    } else if (fseeko(f_, off_t(k), SEEK_CUR) != 0) {
      throw Error(path_ + ": seek failed");
    }
    ends_in_hole_ = p == nullptr;
    written_in_current_ += k;
    data_pos_ += k;
    bytes -= k;
  }
}

void GgufWriter::finish() {
  if (finished_) return;
  if (!header_done_) write_header();
  // Zero-byte tensors need no data; every other one must be complete.
  for (size_t i = current_; i < tensors_.size(); ++i) {
    size_t done = i == current_ ? written_in_current_ : 0;
    if (done != tensors_[i].bytes)
      throw Error(path_ + ": tensor '" + tensors_[i].name + "' has " + std::to_string(done) + " of " +
                  std::to_string(tensors_[i].bytes) + " bytes written");
  }
  // A seek past the end does not grow the file: set its length where the last hole ends.
  if (ends_in_hole_ && (std::fflush(f_) != 0 || ftruncate(fileno(f_), ftello(f_)) != 0))
    throw Error(path_ + ": cannot extend the file over its final hole");
  if (std::fclose(f_) != 0) throw Error(path_ + ": close failed");
  f_ = nullptr;
  finished_ = true;
}

}  // namespace ds4
