#pragma once
// One checkpoint = a model session state at a token prefix, as named byte sections.
//
// Layout (little-endian):
//   "DS4CKPT\0" | u32 version | u32 header_bytes | header | u32 header_crc |
//   sections: { u32 name_len | name | u64 size | u32 crc32c | bytes } * section_count |
//   "DS4CKEND"
//   header = u64 token_count | u64 prefix_hash | u32 section_count | u32 fp_len | fingerprint
// Section 0 is "tokens"; an optional "alias" section (int32 tokens) follows it.
// The trailer catches truncation; per-section CRCs catch bit rot; the fingerprint (model
// identity: family + weight digest) refuses a checkpoint made by another model; the tokens
// are stored as section "tokens" so a hash collision can never restore a wrong prefix.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"

namespace ds4 {

inline constexpr uint32_t kCheckpointVersion = 1;

class CheckpointError : public InputError {
 public:
  explicit CheckpointError(const std::string& what) : InputError(what) {}
};

struct CheckpointSection {
  std::string name;
  std::vector<uint8_t> bytes;
};

struct Checkpoint {
  std::string fingerprint;
  std::vector<int32_t> tokens;
  // Optional second key: the canonical re-render of the same turn (what a client sending
  // the answer back produces) when it differs from `tokens`; stored as section "alias".
  std::vector<int32_t> alias;
  std::vector<CheckpointSection> sections;  // model state, excluding "tokens"
  const CheckpointSection* find(const std::string& name) const;
};

struct CheckpointHeader {
  uint32_t version = 0;
  uint64_t token_count = 0;
  uint64_t prefix_hash = 0;
  std::string fingerprint;
  std::vector<int32_t> alias;  // empty: none
};

// Atomic write (temp + fsync + rename + dir fsync). Returns bytes written.
uint64_t write_checkpoint(const std::string& path, const Checkpoint& ckpt);
// The bytes write_checkpoint writes for `ckpt` (to check a budget before writing).
uint64_t checkpoint_size(const Checkpoint& ckpt);
// Reads only the header and the alias (validated); throws CheckpointError naming file and field.
CheckpointHeader read_checkpoint_header(const std::string& path);
// Full read with every check (magic, version, bounds, CRCs, trailer, fingerprint, tokens
// hash). `expected_fingerprint` empty = accept any model.
Checkpoint read_checkpoint(const std::string& path, const std::string& expected_fingerprint);

}  // namespace ds4
