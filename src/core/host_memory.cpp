#include "core/host_memory.h"

#include <fstream>
#include <sstream>
#include <string>

namespace ds4 {

size_t host_memory_available() {
  std::ifstream in("/proc/meminfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("MemAvailable:", 0) != 0) continue;
    std::istringstream s(line.substr(13));
    size_t kib = 0;
    s >> kib;
    return kib << 10;
  }
  return 0;
}

}  // namespace ds4
