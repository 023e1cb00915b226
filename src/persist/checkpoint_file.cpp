#include "persist/checkpoint_file.h"

#include <cstring>

#include "core/mapped_file.h"
#include "persist/atomic_file.h"
#include "persist/crc32c.h"
#include "persist/prefix_hash.h"

namespace ds4 {
namespace {

constexpr char kMagic[8] = {'D', 'S', '4', 'C', 'K', 'P', 'T', '\0'};
constexpr char kTrailer[8] = {'D', 'S', '4', 'C', 'K', 'E', 'N', 'D'};
constexpr uint32_t kMaxName = 256;
constexpr uint32_t kMaxFingerprint = 4096;

template <typename T>
void put(std::vector<uint8_t>& out, T v) {
  uint8_t b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  out.insert(out.end(), b, b + sizeof(T));
}

// Bounds-checked reader over the mapped file; every failure names the file and field.
class Cursor {
 public:
  Cursor(const MappedFile& f) : f_(f) {}
  template <typename T>
  T get(const char* field) {
    T v;
    std::memcpy(&v, take(sizeof(T), field), sizeof(T));
    return v;
  }
  const uint8_t* take(uint64_t n, const char* field) {
    if (n > f_.size() - pos_) fail(std::string("truncated at ") + field);
    const uint8_t* p = f_.data() + pos_;
    pos_ += n;
    return p;
  }
  size_t pos() const { return pos_; }
  bool at_end() const { return pos_ == f_.size(); }
  [[noreturn]] void fail(const std::string& what) const {
    throw CheckpointError("checkpoint " + f_.path() + ": " + what);
  }

 private:
  const MappedFile& f_;
  size_t pos_ = 0;
};

// encode_header's fixed fields (token count, prefix hash, section count, fingerprint length);
// the fingerprint's bytes follow them.
constexpr uint64_t kHeaderFixedBytes = 8 + 8 + 4 + 4;

std::vector<uint8_t> encode_header(const Checkpoint& c, uint32_t sections) {
  std::vector<uint8_t> h;
  put<uint64_t>(h, c.tokens.size());
  put<uint64_t>(h, prefix_hash(c.tokens));
  put<uint32_t>(h, sections);
  put<uint32_t>(h, uint32_t(c.fingerprint.size()));
  h.insert(h.end(), c.fingerprint.begin(), c.fingerprint.end());
  return h;
}

// The section CRC covers its name and size too, so a damaged name is caught like damaged data.
uint32_t section_crc(const std::string& name, uint64_t size, const void* data) {
  uint32_t crc = crc32c(name.data(), name.size());
  crc = crc32c(&size, sizeof size, crc);
  return crc32c(data, size, crc);
}

void write_section(FileWriter& w, const std::string& name, const void* data, uint64_t size) {
  std::vector<uint8_t> head;
  put<uint32_t>(head, uint32_t(name.size()));
  head.insert(head.end(), name.begin(), name.end());
  put<uint64_t>(head, size);
  put<uint32_t>(head, section_crc(name, size, data));
  w.write(head.data(), head.size());
  w.write(data, size);
}

CheckpointHeader parse_header(Cursor& c, uint32_t* section_count) {
  if (std::memcmp(c.take(8, "magic"), kMagic, 8) != 0) c.fail("bad magic (not a ds4 checkpoint)");
  CheckpointHeader h;
  h.version = c.get<uint32_t>("version");
  if (h.version != kCheckpointVersion)
    c.fail("version " + std::to_string(h.version) + " (this build reads " + std::to_string(kCheckpointVersion) + ")");
  uint32_t header_bytes = c.get<uint32_t>("header_bytes");
  if (header_bytes < 24 || header_bytes > 24 + kMaxFingerprint) c.fail("header_bytes out of range");
  const uint8_t* hp = c.take(header_bytes, "header");
  uint32_t crc = c.get<uint32_t>("header_crc");
  if (crc != crc32c(hp, header_bytes)) c.fail("header checksum mismatch");
  uint32_t fp_len;
  std::memcpy(&h.token_count, hp, 8);
  std::memcpy(&h.prefix_hash, hp + 8, 8);
  std::memcpy(section_count, hp + 16, 4);
  std::memcpy(&fp_len, hp + 20, 4);
  if (fp_len != header_bytes - 24) c.fail("fingerprint length inconsistent with header");
  h.fingerprint.assign(reinterpret_cast<const char*>(hp + 24), fp_len);
  return h;
}

struct RawSection {
  std::string name;
  uint64_t size = 0;
  const uint8_t* data = nullptr;
};

// One section, bounds- and checksum-checked.
RawSection read_section(Cursor& c) {
  uint32_t name_len = c.get<uint32_t>("section name length");
  if (name_len == 0 || name_len > kMaxName) c.fail("section name length out of range");
  RawSection s;
  s.name.assign(reinterpret_cast<const char*>(c.take(name_len, "section name")), name_len);
  s.size = c.get<uint64_t>("section size");
  uint32_t crc = c.get<uint32_t>("section crc");
  s.data = c.take(s.size, ("section " + s.name).c_str());
  if (section_crc(s.name, s.size, s.data) != crc) c.fail("section '" + s.name + "' checksum mismatch");
  return s;
}

std::vector<int32_t> alias_tokens(const Cursor& c, const RawSection& s) {
  if (s.size % 4 != 0 || s.size == 0) c.fail("alias section malformed");
  std::vector<int32_t> a(s.size / 4);
  std::memcpy(a.data(), s.data, s.size);
  return a;
}

}  // namespace

const CheckpointSection* Checkpoint::find(const std::string& name) const {
  for (const auto& s : sections)
    if (s.name == name) return &s;
  return nullptr;
}

uint64_t write_checkpoint(const std::string& path, const Checkpoint& ckpt) {
  if (ckpt.fingerprint.size() > kMaxFingerprint) throw Error("checkpoint fingerprint too long");
  for (const auto& s : ckpt.sections)
    if (s.name.empty() || s.name.size() > kMaxName || s.name == "tokens" || s.name == "alias")
      throw Error("checkpoint section name invalid: '" + s.name + "'");
  uint64_t total = 0;
  write_file_atomic(path, [&](FileWriter& w) {
    std::vector<uint8_t> head(kMagic, kMagic + 8);
    std::vector<uint8_t> header = encode_header(ckpt, uint32_t(ckpt.sections.size() + 1 + (ckpt.alias.empty() ? 0 : 1)));
    put<uint32_t>(head, kCheckpointVersion);
    put<uint32_t>(head, uint32_t(header.size()));
    head.insert(head.end(), header.begin(), header.end());
    put<uint32_t>(head, crc32c(header.data(), header.size()));
    w.write(head.data(), head.size());
    write_section(w, "tokens", ckpt.tokens.data(), ckpt.tokens.size() * sizeof(int32_t));
    if (!ckpt.alias.empty()) write_section(w, "alias", ckpt.alias.data(), ckpt.alias.size() * sizeof(int32_t));
    for (const auto& s : ckpt.sections) write_section(w, s.name, s.bytes.data(), s.bytes.size());
    w.write(kTrailer, 8);
    total = w.written();
  });
  return total;
}

uint64_t checkpoint_size(const Checkpoint& ckpt) {
  auto section = [](size_t name, uint64_t bytes) { return 4 + uint64_t(name) + 8 + 4 + bytes; };
  uint64_t n = 8 + 4 + 4 + kHeaderFixedBytes + ckpt.fingerprint.size() + 4;  // magic, version, length, header, crc
  n += section(6, ckpt.tokens.size() * sizeof(int32_t));
  if (!ckpt.alias.empty()) n += section(5, ckpt.alias.size() * sizeof(int32_t));
  for (const auto& s : ckpt.sections) n += section(s.name.size(), s.bytes.size());
  return n + 8;  // trailer
}

CheckpointHeader read_checkpoint_header(const std::string& path) {
  auto file = MappedFile::open(path);
  Cursor c(*file);
  uint32_t sections = 0;
  CheckpointHeader h = parse_header(c, &sections);
  // The alias sits right after the tokens, at the start of the file: cheap to read here,
  // so a manifest rebuilt from the headers keeps both keys.
  if (sections >= 2) {
    read_section(c);
    RawSection s = read_section(c);
    if (s.name == "alias") h.alias = alias_tokens(c, s);
  }
  return h;
}

Checkpoint read_checkpoint(const std::string& path, const std::string& expected_fingerprint) {
  auto file = MappedFile::open(path);
  Cursor c(*file);
  uint32_t count = 0;
  CheckpointHeader h = parse_header(c, &count);
  if (!expected_fingerprint.empty() && h.fingerprint != expected_fingerprint)
    c.fail("made by another model ('" + h.fingerprint + "', expected '" + expected_fingerprint + "')");
  if (count == 0 || count > 4096) c.fail("section count " + std::to_string(count) + " out of range");
  Checkpoint out;
  out.fingerprint = h.fingerprint;
  for (uint32_t i = 0; i < count; ++i) {
    RawSection sec = read_section(c);
    if (i == 0) {
      if (sec.name != "tokens" || sec.size % 4 != 0 || sec.size / 4 != h.token_count) c.fail("tokens section malformed");
      out.tokens.resize(sec.size / 4);
      std::memcpy(out.tokens.data(), sec.data, sec.size);
      if (prefix_hash(out.tokens) != h.prefix_hash) c.fail("tokens do not match the prefix hash");
    } else if (i == 1 && sec.name == "alias") {
      out.alias = alias_tokens(c, sec);
    } else {
      out.sections.push_back({std::move(sec.name), std::vector<uint8_t>(sec.data, sec.data + sec.size)});
    }
  }
  if (std::memcmp(c.take(8, "trailer"), kTrailer, 8) != 0) c.fail("bad trailer");
  if (!c.at_end()) c.fail("trailing bytes after the trailer");
  return out;
}

}  // namespace ds4
