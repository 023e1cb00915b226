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
#include "core/paged_rows.h"

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
  // A paged per-position cache: the same bytes as the contiguous rows it holds, so
  // checkpoints do not depend on the block size.
  void vec(const std::string& name, const PagedRows& v) {
    const std::vector<float> rows = v.flatten();
    vec(name, rows);
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
  // A paged cache keeps the fresh state's row width: the section must be whole rows of it
  // (none at all for a cache of width 0, which that layer does not have).
  void vec(const std::string& name, PagedRows& v) {
    const StateSection& s = get(name);
    const size_t row_bytes = size_t(v.width()) * sizeof(float);
    if (row_bytes == 0 ? !s.bytes.empty() : s.bytes.size() % row_bytes != 0)
      throw InputError("checkpoint section '" + name + "': " + std::to_string(s.bytes.size()) +
                       " bytes is not a whole number of rows of " + std::to_string(v.width()) + " floats");
    const int64_t n = row_bytes ? int64_t(s.bytes.size() / row_bytes) : 0;
    std::vector<float> rows(size_t(n) * size_t(v.width()));
    if (!rows.empty()) std::memcpy(rows.data(), s.bytes.data(), s.bytes.size());
    v.assign(rows.data(), n);
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

// A paged per-position cache holds one row per position, or none (a layer without it).
inline void require_rows(const char* family, const std::string& section, const PagedRows& rows, int64_t pos) {
  if (rows.rows() != 0 && rows.rows() != pos)
    throw InputError(std::string(family) + " checkpoint: section '" + section + "' holds " +
                     std::to_string(rows.rows()) + " rows, not one per position (pos " + std::to_string(pos) + ")");
}

}  // namespace ds4
