// Token masks of the tool-call constraint (engine/token_constraint.h) on a small byte-level
// vocabulary with multi-byte and control tokens: the exact ids each step allows, and random
// "models" (random logits, argmax of the masked row) that always end in a call the family
// parser reads and whose arguments satisfy the schema.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <random>
#include <set>

#include "engine/token_constraint.h"
#include "tokenizer/chat_template.h"

namespace ds4::engine {
namespace {

using tok::Family;
using Mode = tok::ToolChoice::Mode;

// ids 0..255: the bytes; then control tokens; then multi-byte text tokens; the stop last.
struct Vocab {
  std::vector<std::string> text;
  std::set<int32_t> control;
  int32_t stop = -1;
  int32_t id(const std::string& t) const {
    for (size_t i = 256; i < text.size(); ++i)
      if (text[i] == t) return int32_t(i);
    return -1;
  }
};

Vocab vocab(Family f) {
  Vocab v;
  for (int b = 0; b < 256; ++b) v.text.push_back(std::string(1, char(b)));
  std::vector<std::string> controls = {"<think>", "</think>"};
  if (f == Family::kDeepSeekV4) controls.push_back("｜DSML｜");
  else controls.insert(controls.end(), {"<tool_call>", "</tool_call>"});
  if (f == Family::kGlm5) controls.insert(controls.end(), {"<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>"});
  for (const auto& c : controls) {
    v.control.insert(int32_t(v.text.size()));
    v.text.push_back(c);
  }
  for (const char* t : {"<function=", "noop>\n", "\n<", "get_weather", "<parameter=", "</parameter>", "\n</",
                        "city", "days", "Paris", "\": ", "\", \"", "true", "false", "123", " name=\"", "invoke",
                        "parameter", "string=\"", "\">", ">\n", "{\"", "\"}", "[\"", "\"]"})
    v.text.push_back(t);
  v.stop = int32_t(v.text.size());
  v.text.push_back("<|end|>");
  return v;
}

std::shared_ptr<const TokenTable> table(const Vocab& v) {
  TokenSource src;
  src.vocab_size = int(v.text.size());
  src.bytes = [&v](int32_t id) { return v.text[size_t(id)]; };
  src.is_control = [&v](int32_t id) { return v.control.count(id) > 0; };
  src.is_stop = [&v](int32_t id) { return id == v.stop; };
  return make_token_table(src);
}

const std::string kNoop = R"({"type":"function","function":{"name":"noop","parameters":{"type":"object","properties":{}}}})";
const std::string kWeather = R"({"type":"function","function":{"name":"get_weather","parameters":{"type":"object",
  "properties":{"city":{"type":"string","maxLength":8},"days":{"type":"integer"},"unit":{"enum":["c","f"]},
  "flags":{"type":"array","items":{"type":"boolean"},"maxItems":3},
  "opts":{"type":"object","properties":{"hourly":{"type":"boolean"},"note":{"type":"string","maxLength":5}},"required":["hourly"]}},
  "required":["city","days"]}}})";

std::unique_ptr<TokenConstraint> constraint(Family f, const Vocab& v, Mode m, const std::string& fn,
                                            std::vector<std::string> tools, bool reasoning = false) {
  tok::ToolChoice c;
  c.mode = m;
  c.function = fn;
  auto t = table(v);
  return make_grammar_constraint(tok::ToolGrammar::build(f, tools, c, reasoning, t->vocab), t);
}

std::vector<int32_t> allowed(TokenConstraint& c, size_t n) {
  std::vector<float> row(n, 0.0f);
  c.mask(row);
  std::vector<int32_t> ids;
  for (size_t i = 0; i < n; ++i)
    if (std::isfinite(row[i])) ids.push_back(int32_t(i));
  return ids;
}

TEST(TokenConstraint, ExactIdsPerStepWithMultiByteAndControlTokens) {
  const Vocab v = vocab(Family::kQwen35);
  auto c = constraint(Family::kQwen35, v, Mode::kFunction, "noop", {kWeather, kNoop});
  const size_t n = v.text.size();
  const int32_t open = v.id("<tool_call>"), close = v.id("</tool_call>");
  // Only the opening control token: not '<' (the marker in bytes), not text, not the stop.
  EXPECT_EQ(allowed(*c, n), std::vector<int32_t>({open}));
  ASSERT_TRUE(c->accept(open));
  // "\n" as a byte, or "\n<" which spans into "<function=".
  EXPECT_EQ(allowed(*c, n), std::vector<int32_t>({'\n', v.id("\n<")}));
  ASSERT_TRUE(c->accept(v.id("\n<")));
  EXPECT_EQ(allowed(*c, n), std::vector<int32_t>({'f'}));
  for (char ch : std::string("function=")) ASSERT_TRUE(c->accept(uint8_t(ch)));
  EXPECT_EQ(allowed(*c, n), std::vector<int32_t>({'n', v.id("noop>\n")}));
  ASSERT_TRUE(c->accept(v.id("noop>\n")));
  EXPECT_EQ(allowed(*c, n), std::vector<int32_t>({'<'}));  // no parameters: only the close
  for (char ch : std::string("</function>\n")) ASSERT_TRUE(c->accept(uint8_t(ch)));
  EXPECT_EQ(allowed(*c, n), std::vector<int32_t>({close}));
  ASSERT_TRUE(c->accept(close));
  EXPECT_EQ(allowed(*c, n), std::vector<int32_t>({v.stop}));  // a named call is one call
  EXPECT_FALSE(c->done());
  ASSERT_TRUE(c->accept(v.stop));
  EXPECT_TRUE(c->done());
  EXPECT_FALSE(c->accept(v.stop));
}

// Checks the arguments against kWeather's schema by hand (what a JSON-schema validator would).
void expect_valid_weather(const nlohmann::json& a, const std::string& where) {
  ASSERT_TRUE(a.is_object()) << where;
  ASSERT_TRUE(a.contains("city") && a.contains("days")) << where << a.dump();
  for (auto it = a.begin(); it != a.end(); ++it) {
    const std::string& k = it.key();
    const auto& x = it.value();
    if (k == "city") {
      ASSERT_TRUE(x.is_string()) << where;
      const std::string s = x.get<std::string>();
      size_t cp = 0;
      for (char ch : s) cp += (static_cast<unsigned char>(ch) & 0xC0) != 0x80;
      EXPECT_LE(cp, 8u) << where << " " << s;
    } else if (k == "days") {
      EXPECT_TRUE(x.is_number_integer()) << where << a.dump();
    } else if (k == "unit") {
      EXPECT_TRUE(x == "c" || x == "f") << where;
    } else if (k == "flags") {
      ASSERT_TRUE(x.is_array()) << where;
      EXPECT_LE(x.size(), 3u);
      for (const auto& b : x) EXPECT_TRUE(b.is_boolean()) << where;
    } else if (k == "opts") {
      ASSERT_TRUE(x.is_object() && x.contains("hourly") && x["hourly"].is_boolean()) << where << a.dump();
      for (auto o = x.begin(); o != x.end(); ++o) EXPECT_TRUE(o.key() == "hourly" || (o.key() == "note" && o->is_string()));
    } else {
      ADD_FAILURE() << where << ": unknown argument " << k;
    }
  }
}

TEST(TokenConstraint, RandomModelsAlwaysEndInAValidCall) {
  for (Family f : {Family::kQwen35, Family::kGlm5, Family::kDeepSeekV4}) {
    const Vocab v = vocab(f);
    for (int seed = 0; seed < 12; ++seed) {
      const bool reasoning = seed % 3 == 2;
      const Mode mode = seed % 2 ? Mode::kRequired : Mode::kFunction;
      auto c = constraint(f, v, mode, "get_weather", {kWeather, kNoop}, reasoning);
      std::mt19937 rng(uint32_t(seed * 7919 + int(f)));
      std::normal_distribution<float> noise(0.0f, 1.0f);
      std::string text;
      bool stopped = false;
      for (int step = 0; step < 3000 && !stopped; ++step) {
        std::vector<float> row(v.text.size());
        for (auto& x : row) x = noise(rng);
        // Make the reasoning end soon: a random model rarely picks </think> by itself.
        if (reasoning && step > 5) row[size_t(v.id("</think>"))] += 4.0f;
        ASSERT_GT(c->mask(row), 0u) << "dead end at step " << step;
        const int32_t t = int32_t(std::max_element(row.begin(), row.end()) - row.begin());
        ASSERT_TRUE(c->accept(t));
        if (t == v.stop) stopped = true;
        else text += v.text[size_t(t)];
      }
      const std::string where = std::string(tok::family_name(f)) + " seed " + std::to_string(seed);
      ASSERT_TRUE(stopped) << where;
      EXPECT_TRUE(c->done());
      auto p = tok::parse_output(f, reasoning, text, {kWeather, kNoop});
      EXPECT_TRUE(p.tool_errors.empty()) << where << "\n" << text;
      ASSERT_FALSE(p.tool_calls.empty()) << where << "\n" << text;
      if (mode == Mode::kFunction) EXPECT_EQ(p.tool_calls.size(), 1u) << where;
      for (const auto& call : p.tool_calls) {
        if (mode == Mode::kFunction) EXPECT_EQ(call.name, "get_weather") << where;
        if (call.name == "noop") EXPECT_EQ(call.arguments, "{}");
        else expect_valid_weather(nlohmann::json::parse(call.arguments), where + "\n" + text);
      }
    }
  }
}

// The masks (first-byte buckets, plain free-text shortcut) allow exactly the tokens a plain
// State accepts one by one, all along random walks through reasoning, raw strings (with and
// without maxLength), JSON strings and the markers.
TEST(TokenConstraint, MaskEqualsTheTokenByTokenCheck) {
  const std::string free_text = R"({"type":"function","function":{"name":"say","parameters":{"type":"object",
    "properties":{"text":{"type":"string"},"short":{"type":"string","maxLength":4},"list":{"type":"array","items":{"type":"string"},"maxItems":2}},
    "required":["text","short","list"]}}})";
  for (Family f : {Family::kQwen35, Family::kGlm5, Family::kDeepSeekV4}) {
    const Vocab v = vocab(f);
    auto t = table(v);
    for (int seed = 0; seed < 4; ++seed) {
      tok::ToolChoice choice;
      choice.mode = seed == 3 ? Mode::kNone : Mode::kRequired;
      auto g = tok::ToolGrammar::build(f, {free_text}, choice, seed % 2 == 1, t->vocab);
      auto c = make_grammar_constraint(g, t);
      auto s = g->start(), x = g->start();
      std::mt19937 rng(uint32_t(seed + 100 * int(f)));
      for (int step = 0; step < 150 && !s.done(); ++step) {
        std::vector<int32_t> brute;
        for (int32_t id = 0; id < int32_t(v.text.size()); ++id) {
          x.assign(s);
          const bool ok = id == v.stop ? x.feed(tok::kStopUnit)
                          : v.control.count(id) ? x.feed(tok::kControlBase + id)
                                                : x.feed_bytes(v.text[size_t(id)]);
          if (ok) brute.push_back(id);
        }
        const auto masked = allowed(*c, v.text.size());
        ASSERT_EQ(masked, brute) << tok::family_name(f) << " seed " << seed << " step " << step;
        // Walk on, leaning to the markers so the walk leaves its free text now and then.
        int32_t pick = brute[rng() % brute.size()];
        for (int32_t id : brute)
          if ((v.control.count(id) || id == '<' || id == '"') && rng() % 4 == 0) pick = id;
        ASSERT_TRUE(c->accept(pick));
        ASSERT_TRUE(pick == v.stop ? s.feed(tok::kStopUnit)
                    : v.control.count(pick) ? s.feed(tok::kControlBase + pick)
                                            : s.feed_bytes(v.text[size_t(pick)]));
      }
    }
  }
}

TEST(TokenConstraint, NoneMasksTheOpeningInEveryForm) {
  const Vocab v = vocab(Family::kQwen35);
  auto c = constraint(Family::kQwen35, v, Mode::kNone, "", {kWeather});
  auto ids = allowed(*c, v.text.size());
  EXPECT_EQ(std::count(ids.begin(), ids.end(), v.id("<tool_call>")), 0);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), v.stop), 1);
  for (char ch : std::string("<tool_call")) ASSERT_TRUE(c->accept(uint8_t(ch)));
  ids = allowed(*c, v.text.size());
  EXPECT_EQ(std::count(ids.begin(), ids.end(), '>'), 0);  // the marker's last byte
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 'x'), 1);
}

}  // namespace
}  // namespace ds4::engine
