#pragma once
// Errors are exceptions with context: what failed, in which file/field, with which value.
#include <stdexcept>
#include <string>

namespace ds4 {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

// Thrown where a request or an input file is bad (as opposed to an internal bug).
class InputError : public Error {
 public:
  explicit InputError(const std::string& what) : Error(what) {}
};

}  // namespace ds4

#define DS4_CHECK(cond, msg)                                       \
  do {                                                             \
    if (!(cond)) throw ::ds4::Error(std::string(msg));             \
  } while (0)
