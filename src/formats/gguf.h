#pragma once
// GGUF v3 (and v2) files: typed metadata, tensor infos, alignment. The reader validates
// every count, size and offset against the file before touching memory; tensors are
// zero-copy views into the mapping. Shapes are given in torch order (GGUF's ne[] reversed).
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/dtype.h"
#include "core/mapped_file.h"

namespace ds4 {

// Metadata value types, numbered as in the GGUF specification.
enum class GgufType : uint32_t {
  U8 = 0, I8 = 1, U16 = 2, I16 = 3, U32 = 4, I32 = 5, F32 = 6, BOOL = 7,
  STRING = 8, ARRAY = 9, U64 = 10, I64 = 11, F64 = 12,
};
const char* gguf_type_name(GgufType t);

// A typed metadata value. Scalars and strings live in `value`; arrays list their element
// type in `elem_type` and their elements in `items` (nested arrays nest GgufValues).
struct GgufValue {
  GgufType type = GgufType::U32;
  nlohmann::json value;           // scalar or string
  GgufType elem_type = GgufType::U8;
  std::vector<GgufValue> items;   // ARRAY only

  static GgufValue scalar(GgufType t, nlohmann::json v) { return {t, std::move(v), GgufType::U8, {}}; }
  static GgufValue string(std::string s) { return scalar(GgufType::STRING, std::move(s)); }
  nlohmann::json to_json() const;  // arrays become JSON arrays
};

struct GgufKV {
  std::string key;
  GgufValue value;
};

// ggml tensor type ids (the subset ds4 reads/writes) <-> DType.
uint32_t ggml_type_id(DType t);   // throws for MLX types
bool dtype_from_ggml(uint32_t id, DType* out);

struct GgufTensor {
  std::string name;
  DType type = DType::F32;
  std::vector<int64_t> shape;  // torch order (ne reversed)
  uint64_t offset = 0;         // relative to the data section
  size_t bytes = 0;
};

struct GgufFile {
  std::shared_ptr<const MappedFile> file;
  uint32_t version = 3;
  uint64_t alignment = 32;
  uint64_t data_offset = 0;  // absolute start of the tensor data section
  std::vector<GgufKV> kvs;
  std::vector<GgufTensor> tensors;

  const GgufValue* find(const std::string& key) const;
  const uint8_t* tensor_data(const GgufTensor& t) const { return file->data() + data_offset + t.offset; }
};

// Parses and validates; throws ds4::InputError("<file>: <field>: <problem>").
GgufFile read_gguf(std::shared_ptr<const MappedFile> file);
inline GgufFile read_gguf(const std::string& path) { return read_gguf(MappedFile::open(path)); }

// Streaming writer: declare metadata and tensors, then write each tensor's bytes in
// declaration order (in as many chunks as convenient); padding is inserted between
// tensors so each starts on `alignment`. Only the header is held in memory.
class GgufWriter {
 public:
  explicit GgufWriter(std::string path, uint64_t alignment = 32);
  ~GgufWriter();
  void set(const std::string& key, GgufValue v);
  void add_tensor(const std::string& name, DType type, const std::vector<int64_t>& shape);
  // Appends bytes of the current tensor; moves to the next once it is complete.
  void write(const void* data, size_t bytes);
  // Appends `bytes` zero bytes by seeking: on file systems with sparse files they take no
  // space (synthetic full-size models).
  void write_zeros(size_t bytes);
  void finish();  // checks every tensor was written completely, closes the file

 private:
  void write_header();
  void append(const uint8_t* p, size_t bytes);
  std::string path_;
  uint64_t alignment_;
  std::vector<GgufKV> kvs_;
  std::vector<GgufTensor> tensors_;
  std::FILE* f_ = nullptr;
  size_t current_ = 0;
  size_t written_in_current_ = 0;
  uint64_t data_bytes_ = 0;  // declared size of the data section
  uint64_t data_pos_ = 0;    // bytes written into the data section
  bool header_done_ = false;
  bool finished_ = false;
  bool ends_in_hole_ = false;
};

}  // namespace ds4
