#pragma once
// A read-only file mapped into memory (or an owned byte buffer with the same interface,
// used by tests and by in-memory parsing). Tensor views point into it, so readers hand
// out shared_ptrs that keep the mapping alive as long as any view's owner holds it.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace ds4 {

class MappedFile {
 public:
  // Maps `path` read-only; throws ds4::InputError naming the path on failure.
  static std::shared_ptr<const MappedFile> open(const std::string& path);
  // Wraps bytes already in memory; `name` is used in error messages.
  static std::shared_ptr<const MappedFile> from_bytes(std::string name, std::vector<uint8_t> bytes);

  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  MappedFile() = default;
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  bool mapped_ = false;
  std::vector<uint8_t> owned_;
};

}  // namespace ds4
