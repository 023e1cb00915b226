#pragma once
// A tiny byte-level BPE tokenizer.json built in code: 256 byte tokens, a few merges and
// the Qwen ChatML control tokens, so unit tests need no generated files.
#include <nlohmann/json.hpp>
#include <string>

#include "tokenizer/utf8.h"

namespace ds4::tok::test {

inline std::string byte_str(unsigned char b) {
  std::string s;
  utf8_append(s, byte_to_cp(b));
  return s;
}

inline std::string tiny_tokenizer_json() {
  nlohmann::ordered_json vocab = nlohmann::ordered_json::object();
  for (int b = 0; b < 256; ++b) vocab[byte_str(static_cast<unsigned char>(b))] = b;
  // Merges in rank order: "h e" -> he (256), "l l" -> ll (257), "he ll" -> hell (258),
  // "Ġ w" -> Ġw (259), "o r" -> or (260).
  const char* merges[][2] = {{"h", "e"}, {"l", "l"}, {"he", "ll"}, {"Ġ", "w"}, {"o", "r"}};
  nlohmann::ordered_json m = nlohmann::ordered_json::array();
  int id = 256;
  for (auto& mg : merges) {
    vocab[std::string(mg[0]) + mg[1]] = id++;
    m.push_back(std::string(mg[0]) + " " + mg[1]);
  }
  nlohmann::ordered_json added = nlohmann::ordered_json::array();
  const char* specials[] = {"<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>",
                            "<tool_call>", "</tool_call>"};
  for (const char* s : specials)
    added.push_back({{"id", id++}, {"content", s}, {"single_word", false}, {"lstrip", false}, {"rstrip", false},
                     {"normalized", false}, {"special", std::string(s).find("<|") == 0}});
  nlohmann::ordered_json doc = {
      {"version", "1.0"},
      {"added_tokens", added},
      {"normalizer", {{"type", "NFC"}}},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers",
         {{{"type", "Split"},
           {"pattern", {{"Regex", R"('s|'t|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"}}},
           {"behavior", "Isolated"},
           {"invert", false}},
          {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}}}},
      {"decoder", {{"type", "ByteLevel"}}},
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", m}}}};
  return doc.dump();
}

}  // namespace ds4::tok::test
