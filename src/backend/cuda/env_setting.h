#pragma once
// A kernel switch read from the environment once (backend kernels and the models' kernels alike):
// the value a setter stored in `cell`, else the environment variable `name` (one of `allowed`,
// else InputError naming `expected`), else `unset`; the result is kept in `cell`.
#include <atomic>
#include <initializer_list>
#include <cstdlib>
#include <string>

#include "core/error.h"

namespace ds4::cuda {

// A kernel setting read from the environment variable `name` on first use (`unset` when unset; one
// of `allowed`, else InputError with `expected`) unless a setter stored it in `cell` before.
inline int env_setting(std::atomic<int>& cell, const char* name, std::initializer_list<int> allowed,
                       const char* expected, int unset = 0) {
  int v = cell.load(std::memory_order_relaxed);
  if (v < 0) {
    v = unset;
    if (const char* e = std::getenv(name)) {
      const std::string t = e;
      bool ok = false;
      for (int c : allowed) ok = ok || t == std::to_string(c);
      if (!ok) throw InputError(std::string(name) + "=" + t + ": expected " + expected);
      v = std::stoi(t);
    }
    cell.store(v, std::memory_order_relaxed);
  }
  return v;
}

}  // namespace ds4::cuda
