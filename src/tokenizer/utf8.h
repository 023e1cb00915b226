#pragma once
// UTF-8 helpers and the GPT-2 byte-level alphabet (each byte <-> one printable code point).
#include <cstdint>
#include <string>
#include <string_view>

namespace ds4::tok {

// Length in bytes of the valid UTF-8 sequence starting at s[i], or 0 if the bytes there
// are not a valid (complete) sequence.
size_t utf8_valid_len(std::string_view s, size_t i);
bool utf8_is_valid(std::string_view s);
// Appends code point cp as UTF-8.
void utf8_append(std::string& out, uint32_t cp);
// Decodes the valid sequence of length len at p (caller checked validity).
uint32_t utf8_decode(const char* p, size_t len);

// Byte-level alphabet: byte b <-> code point byte_to_cp(b) (printable bytes map to
// themselves, the other 68 bytes to U+0100..U+0143 in order).
uint32_t byte_to_cp(uint8_t b);
// Inverse; -1 when cp is not in the alphabet.
int cp_to_byte(uint32_t cp);
// Maps a string of raw bytes to its byte-level form (UTF-8 of the mapped code points).
std::string bytes_to_byte_level(std::string_view bytes);
// The inverse of the above if every code point of s is in the alphabet; false otherwise
// (out is then unspecified).
bool byte_level_to_bytes(std::string_view s, std::string& out);

}  // namespace ds4::tok
