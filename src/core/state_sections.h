#pragma once
// Neutral "named byte section" form of a model state, shared by models/ (which fills and
// reads it) and persist/ (which writes it to disk), so neither depends on the other.
//
// A family lists its state's vectors once in a template `visit(io, state)`; StateWriter
// and StateReader run that list in both directions, so save and load can never disagree
// on names or order.
#include <cstdint>
#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/error.h"

namespace ds4 {

struct StateSection {
  std::string name;
  std::vector<uint8_t> bytes;
};

class StateWriter {
 public:
  explicit StateWriter(std::vector<StateSection>& out) : out_(out) {}
  template <class T>
  void vec(const std::string& name, const std::vector<T>& v, bool /*fixed*/ = false) {
    StateSection s{name, std::vector<uint8_t>(v.size() * sizeof(T))};
    if (!v.empty()) std::memcpy(s.bytes.data(), v.data(), s.bytes.size());
    out_.push_back(std::move(s));
  }
  template <class T>
  void scalar(const std::string& name, const T& x) {
    StateSection s{name, std::vector<uint8_t>(sizeof(T))};
    std::memcpy(s.bytes.data(), &x, sizeof(T));
    out_.push_back(std::move(s));
  }
  // A bool as one byte (0 / 1).
  void flag(const std::string& name, bool b) { scalar(name, uint8_t(b ? 1 : 0)); }

 private:
  std::vector<StateSection>& out_;
};

// Reads into a fresh state made by the same model (so fixed-size vectors already have the
// model's shapes). `fixed` vectors must keep their size exactly; growing ones (KV rows)
// must be a whole number of `row` elements. Any mismatch or missing section is an
// InputError naming the section.
class StateReader {
 public:
  explicit StateReader(const std::vector<StateSection>& in) {
    for (size_t i = 0; i < in.size(); ++i) index_[in[i].name] = &in[i];
  }
  template <class T>
  void vec(const std::string& name, std::vector<T>& v, bool fixed = false, size_t row = 1) {
    const StateSection& s = get(name);
    if (s.bytes.size() % sizeof(T) != 0)
      throw InputError("checkpoint section '" + name + "': " + std::to_string(s.bytes.size()) +
                       " bytes is not a whole number of elements");
    const size_t n = s.bytes.size() / sizeof(T);
    if (fixed && n != v.size())
      throw InputError("checkpoint section '" + name + "': " + std::to_string(n) + " elements, model expects " +
                       std::to_string(v.size()));
    if (!fixed && row > 1 && n % row != 0)
      throw InputError("checkpoint section '" + name + "': " + std::to_string(n) +
                       " elements is not a whole number of rows of " + std::to_string(row));
    v.resize(n);
    if (n) std::memcpy(v.data(), s.bytes.data(), s.bytes.size());
  }
  template <class T>
  void scalar(const std::string& name, T& x) {
    const StateSection& s = get(name);
    if (s.bytes.size() != sizeof(T))
      throw InputError("checkpoint section '" + name + "': " + std::to_string(s.bytes.size()) + " bytes, expected " +
                       std::to_string(sizeof(T)));
    std::memcpy(&x, s.bytes.data(), sizeof(T));
  }
  void flag(const std::string& name, bool& b) {
    uint8_t v = 0;
    scalar(name, v);
    b = v != 0;
  }
  size_t used() const { return used_; }

 private:
  const StateSection& get(const std::string& name) {
    auto it = index_.find(name);
    if (it == index_.end()) throw InputError("checkpoint: missing section '" + name + "'");
    ++used_;
    return *it->second;
  }
  std::unordered_map<std::string, const StateSection*> index_;
  size_t used_ = 0;
};

// The load shell every family shares: reads the sections through `visit` into a copy of
// `current` (a refused checkpoint leaves the caller's state untouched), refuses unknown
// sections and a negative 'pos'. The family runs its own row checks on the result, then
// commits it.
template <class S, class Visit>
S read_state_sections(const char* family, const S& current, const std::vector<StateSection>& in, Visit visit) {
  StateReader r(in);
  S fresh = current;
  visit(r, fresh);
  if (r.used() != in.size())
    throw InputError(std::string(family) + " checkpoint: " + std::to_string(in.size() - r.used()) +
                     " unknown sections (other layer count?)");
  if (fresh.pos < 0) throw InputError(std::string(family) + " checkpoint: section 'pos' is negative");
  return fresh;
}

// Growing per-position sections (KV / latent / indexer rows) hold a whole row per position;
// any other size (or `consistent` false, e.g. K and V disagreeing) is a truncated or foreign
// section.
inline void require_whole_rows(const char* family, const std::string& section, size_t n, int64_t pos,
                               bool consistent = true) {
  if (n != 0 && (!consistent || pos == 0 || n % size_t(pos) != 0))
    throw InputError(std::string(family) + " checkpoint: section '" + section + "' holds " + std::to_string(n) +
                     " floats, not a whole row per position (pos " + std::to_string(pos) + ")");
}

}  // namespace ds4
