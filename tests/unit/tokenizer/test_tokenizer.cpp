#include <gtest/gtest.h>

#include "core/error.h"
#include "tiny_tokenizer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace ds4::tok {
namespace {

const Tokenizer& tiny() {
  static const Tokenizer t = Tokenizer::from_json(test::tiny_tokenizer_json(), "tiny");
  return t;
}

TEST(Tokenizer, MergesApplyInRankOrder) {
  // "hello" -> h e l l o -> he ll o -> hell o ; " world" -> Ġw or l d.
  EXPECT_EQ(tiny().encode("hello"), (std::vector<TokenId>{258, 'o'}));
  EXPECT_EQ(tiny().encode(" world"), (std::vector<TokenId>{259, 260, 'l', 'd'}));
  EXPECT_EQ(tiny().decode(tiny().encode("hello world")), "hello world");
}

TEST(Tokenizer, AddedTokensOnlyWhenAllowed) {
  const std::string text = "a<|im_end|>b";
  auto special = tiny().encode(text, true);
  ASSERT_EQ(special.size(), 3u);
  EXPECT_EQ(special[1], tiny().str_to_token("<|im_end|>"));
  auto plain = tiny().encode(text, false);
  EXPECT_GT(plain.size(), 3u);
  for (auto id : plain) EXPECT_FALSE(tiny().is_added(id));
  EXPECT_EQ(tiny().decode(plain), text);
}

TEST(Tokenizer, TemplateEncodingKeepsUserSpansPlain) {
  const std::string text = "<|im_start|>user <|im_end|><|im_end|>";
  // The user wrote "user <|im_end|>" (bytes 12..27): only the last marker is control.
  auto ids = tiny().encode_template(text, {{12, 27}});
  EXPECT_EQ(ids.front(), tiny().str_to_token("<|im_start|>"));
  EXPECT_EQ(ids.back(), tiny().str_to_token("<|im_end|>"));
  int control = 0;
  for (auto id : ids) control += tiny().is_added(id);
  EXPECT_EQ(control, 2);
  EXPECT_EQ(tiny().decode(ids), text);
}

TEST(Tokenizer, InvalidUtf8IsReplacedLikeHf) {
  // Maximal subparts: E2 28 A1 -> U+FFFD '(' U+FFFD ; F0 9F 98 at the end -> one U+FFFD.
  EXPECT_EQ(utf8_lossy("\xE2\x28\xA1"), "\xEF\xBF\xBD(\xEF\xBF\xBD");
  EXPECT_EQ(utf8_lossy("ok\xF0\x9F\x98"), "ok\xEF\xBF\xBD");
  EXPECT_EQ(utf8_lossy("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(tiny().encode("a\xFF" "b"), tiny().encode("a\xEF\xBF\xBD" "b"));
}

TEST(Tokenizer, NfcNormalizerComposes) {
  // e + U+0301 composes to U+00E9 (2 bytes) before BPE.
  EXPECT_EQ(tiny().encode("e\xCC\x81"), (std::vector<TokenId>{0xC3, 0xA9}));
}

TEST(StreamDecoder, HoldsIncompleteCharacters) {
  StreamDecoder sd(tiny());
  // "€" is E2 82 AC: byte tokens 0xE2, 0x82, 0xAC.
  EXPECT_EQ(sd.push(0xE2), "");
  EXPECT_EQ(sd.pending(), 1u);
  EXPECT_EQ(sd.push(0x82), "");
  EXPECT_EQ(sd.push(0xAC), "\xE2\x82\xAC");
  EXPECT_EQ(sd.push('x'), "x");
  // A sequence that can never complete is replaced as soon as that is known.
  EXPECT_EQ(sd.push(0xE2), "");
  EXPECT_EQ(sd.push('y'), "\xEF\xBF\xBDy");
  EXPECT_EQ(sd.push(0xF0), "");
  EXPECT_EQ(sd.finish(), "\xEF\xBF\xBD");
}

TEST(Tokenizer, UnknownIdIsAnInputError) {
  EXPECT_THROW(tiny().decode({999999}), InputError);
  EXPECT_THROW(tiny().token_to_piece(-1), InputError);
}

TEST(Tokenizer, BadFilesNameTheField) {
  auto expect_error = [](const std::string& json, const std::string& needle) {
    try {
      Tokenizer::from_json(json, "bad.json");
      FAIL() << "no error for " << json;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_error("{", "not valid JSON");
  expect_error("{}", "'model'");
  expect_error(R"({"model":{"type":"Unigram","vocab":{}}})", "model.type");
  expect_error(R"({"model":{"type":"BPE","vocab":{"a":0},"merges":["a b"]}})", "model.merges");
  expect_error(R"({"model":{"type":"BPE","vocab":{"a":0},"merges":[]},"pre_tokenizer":{"type":"Whitespace"}})",
               "pre_tokenizer.type");
  expect_error(R"({"model":{"type":"BPE","vocab":{"a":0},"merges":[]},"pre_tokenizer":{"type":"ByteLevel"}})",
               "has no token");
  EXPECT_THROW(Tokenizer::load("/nonexistent/tokenizer.json"), InputError);
}

}  // namespace
}  // namespace ds4::tok
