#include "persist/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "core/error.h"

namespace ds4 {
namespace fs = std::filesystem;

void FileWriter::write(const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t k = ::write(fd_, p, n);
    if (k < 0) {
      if (errno == EINTR) continue;
      throw Error("write " + path_ + ": " + std::strerror(errno));
    }
    p += k;
    n -= size_t(k);
    written_ += uint64_t(k);
  }
}

static void fsync_dir(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0) throw Error("open dir " + dir + ": " + std::strerror(errno));
  int rc = ::fsync(fd);
  int err = errno;
  ::close(fd);
  if (rc != 0) throw Error("fsync dir " + dir + ": " + std::strerror(err));
}

void write_file_atomic(const std::string& path, const std::function<void(FileWriter&)>& fill) {
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw Error("create " + tmp + ": " + std::strerror(errno));
  try {
    FileWriter w(fd, tmp);
    fill(w);
    if (::fsync(fd) != 0) throw Error("fsync " + tmp + ": " + std::strerror(errno));
    if (::close(fd) != 0) {
      fd = -1;
      throw Error("close " + tmp + ": " + std::strerror(errno));
    }
    fd = -1;
    if (::rename(tmp.c_str(), path.c_str()) != 0) throw Error("rename " + tmp + ": " + std::strerror(errno));
  } catch (...) {
    if (fd >= 0) ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
  std::string dir = fs::path(path).parent_path().string();
  fsync_dir(dir.empty() ? "." : dir);
}

void remove_stale_temps(const std::string& dir) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.path().filename().string().find(".tmp.") != std::string::npos) fs::remove(e.path(), ec);
  }
}

}  // namespace ds4
