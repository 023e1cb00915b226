#pragma once
// Crash-safe file replacement: write to "<path>.tmp.<pid>", fsync it, rename over <path>,
// fsync the directory. A reader sees the old file or the new one, never a torn one; a
// kill -9 at any point leaves at most a stray temp file (removed by remove_stale_temps).
#include <cstdint>
#include <functional>
#include <string>

namespace ds4 {

class FileWriter {
 public:
  explicit FileWriter(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  // Throws ds4::Error with strerror (ENOSPC, EFBIG, ...) naming the file.
  void write(const void* data, size_t n);
  uint64_t written() const { return written_; }

 private:
  int fd_;
  std::string path_;
  uint64_t written_ = 0;
};

// Calls fill(writer) and publishes the result at `path` atomically. On any error the temp
// file is removed, `path` is untouched, and the error is rethrown.
void write_file_atomic(const std::string& path, const std::function<void(FileWriter&)>& fill);

// Removes "*.tmp.*" leftovers of writers that died (kill -9) in `dir`.
void remove_stale_temps(const std::string& dir);

}  // namespace ds4
