// The tool-call grammar (tokenizer/tool_grammar.h) unit by unit: it accepts each family's
// native call text (what the family template renders for an assistant tool call), the
// parser reads that text back into the same call, and it refuses whatever would leave the
// format or the schema at the first unit that does.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tool_grammar.h"

namespace ds4::tok {
namespace {

using Mode = ToolChoice::Mode;
constexpr const char* kStop = "<STOP>";  // stands for a stop token in the test texts

GrammarVocab vocab_of(Family f) {
  GrammarVocab v;
  switch (f) {
    case Family::kQwen35: v.controls = {{"<tool_call>", 300}, {"</tool_call>", 301}, {"<think>", 302}, {"</think>", 303}}; break;
    case Family::kGlm5:
      v.controls = {{"<tool_call>", 300}, {"</tool_call>", 301}, {"<think>", 302}, {"</think>", 303},
                    {"<arg_key>", 304},   {"</arg_key>", 305},   {"<arg_value>", 306}, {"</arg_value>", 307}};
      break;
    case Family::kDeepSeekV4: v.controls = {{"｜DSML｜", 300}, {"<think>", 302}, {"</think>", 303}}; break;
  }
  v.stops = {400};
  return v;
}

// Text -> units the way the tokenizer would produce them: control texts (longest first) as
// their tokens, "<STOP>" as a stop token, everything else byte by byte.
std::vector<int32_t> units(Family f, std::string_view text) {
  const auto v = vocab_of(f);
  std::vector<int32_t> u;
  for (size_t i = 0; i < text.size();) {
    if (text.compare(i, 6, kStop) == 0) {
      u.push_back(kStopUnit);
      i += 6;
      continue;
    }
    bool hit = false;
    for (const auto& [t, id] : v.controls)
      if (text.compare(i, t.size(), t) == 0) {
        u.push_back(kControlBase + id);
        i += t.size();
        hit = true;
        break;
      }
    if (!hit) u.push_back(static_cast<unsigned char>(text[i++]));
  }
  return u;
}

// How many units of `text` the grammar takes (text size = all of them).
size_t accepted(ToolGrammar::State& s, Family f, std::string_view text) {
  const auto u = units(f, text);
  for (size_t i = 0; i < u.size(); ++i)
    if (!s.feed(u[i])) return i;
  return u.size();
}

const std::string kWeather = R"({"type":"function","function":{"name":"get_weather","parameters":{
  "type":"object","properties":{"city":{"type":"string","maxLength":16},"days":{"type":"integer"},
  "unit":{"type":"string","enum":["c","f"]},"tags":{"type":"array","items":{"type":"string"},"maxItems":2},
  "opts":{"type":"object","properties":{"hourly":{"type":"boolean"},"n":{"anyOf":[{"type":"number"},{"type":"null"}]}},
  "required":["hourly"]}},"required":["city","days"]}}})";
const std::string kNoop = R"({"type":"function","function":{"name":"noop","parameters":{"type":"object","properties":{}}}})";

// A State points into its grammar, which must outlive it: the tests keep every grammar.
std::shared_ptr<const ToolGrammar> grammar(Family f, Mode m, bool reasoning = false, std::string fn = "",
                                           bool parallel = true) {
  static std::vector<std::shared_ptr<const ToolGrammar>> keep;
  ToolChoice c;
  c.mode = m;
  c.function = std::move(fn);
  c.parallel = parallel;
  keep.push_back(ToolGrammar::build(f, {kWeather, kNoop}, c, reasoning, vocab_of(f)));
  return keep.back();
}

struct Native {
  Family family;
  std::string text;  // one get_weather call as the family template renders it, then the stop
};

std::vector<Native> natives() {
  return {
      {Family::kQwen35,
       "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=days>\n3\n"
       "</parameter>\n<parameter=tags>\n[\"a\", \"b\"]\n</parameter>\n<parameter=opts>\n{\"hourly\": true, \"n\": -1.5e+2}"
       "\n</parameter>\n<parameter=unit>\nc\n</parameter>\n</function>\n</tool_call><STOP>"},
      {Family::kGlm5,
       "<tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value><arg_key>days</arg_key>"
       "<arg_value>3</arg_value><arg_key>tags</arg_key><arg_value>[\"a\", \"b\"]</arg_value><arg_key>opts</arg_key>"
       "<arg_value>{\"hourly\": true, \"n\": -1.5e+2}</arg_value><arg_key>unit</arg_key><arg_value>c</arg_value></tool_call><STOP>"},
      {Family::kDeepSeekV4,
       "\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"get_weather\">\n<｜DSML｜parameter name=\"city\" string=\"true\">Paris"
       "</｜DSML｜parameter>\n<｜DSML｜parameter name=\"days\" string=\"false\">3</｜DSML｜parameter>\n<｜DSML｜parameter "
       "name=\"tags\" string=\"false\">[\"a\",\"b\"]</｜DSML｜parameter>\n<｜DSML｜parameter name=\"opts\" string=\"false\">"
       "{\"hourly\":true,\"n\":-1.5e+2}</｜DSML｜parameter>\n<｜DSML｜parameter name=\"unit\" string=\"true\">c</｜DSML｜parameter>\n"
       "</｜DSML｜invoke>\n</｜DSML｜tool_calls><STOP>"},
  };
}

TEST(ToolGrammar, AcceptsEachFamilysNativeCallAndTheParserReadsItBack) {
  for (const auto& n : natives()) {
    for (Mode m : {Mode::kRequired, Mode::kFunction}) {
      auto g = grammar(n.family, m, false, "get_weather");
      auto s = g->start();
      EXPECT_EQ(accepted(s, n.family, n.text), units(n.family, n.text).size()) << family_name(n.family);
      EXPECT_TRUE(s.done());
    }
    const std::string out = n.text.substr(0, n.text.size() - 6);
    auto p = parse_output(n.family, false, out, {kWeather, kNoop});
    ASSERT_EQ(p.tool_calls.size(), 1u) << family_name(n.family);
    EXPECT_EQ(p.tool_calls[0].name, "get_weather");
    EXPECT_EQ(nlohmann::json::parse(p.tool_calls[0].arguments),
              nlohmann::json::parse(R"({"city":"Paris","days":3,"tags":["a","b"],"opts":{"hourly":true,"n":-150.0},"unit":"c"})"))
        << family_name(n.family);
    EXPECT_TRUE(p.tool_errors.empty());
  }
}

TEST(ToolGrammar, RefusesAtTheFirstUnitThatLeavesTheFormat) {
  const Family q = Family::kQwen35;
  const std::string head = "<tool_call>\n<function=get_weather>\n";
  struct Case {
    std::string text;
    size_t taken;  // units accepted before the refusal
  };
  const size_t h = units(q, head).size();
  const std::vector<Case> cases = {
      {"<tool_call>\n<function=get_wrong", units(q, "<tool_call>\n<function=get_w").size()},
      {"<tool_", 0},                                        // the opening spelled in bytes, not its token
      {"hello", 0},                                         // text before the call
      {head + "</function>", h + 1},                        // close before the required city/days
      {head + "<parameter=city>\nP</function>", h + units(q, "<parameter=city>\nP</function").size()},
      {head + "<parameter=days>\n3.5", h + units(q, "<parameter=days>\n3").size()},  // integer
      {head + "<parameter=days>\n03", h + units(q, "<parameter=days>\n0").size()},
      {head + "<parameter=unit>\nk", h + units(q, "<parameter=unit>\n").size()},      // enum c / f
      {head + "<parameter=city>\nParisFranceEurope", h + units(q, "<parameter=city>\nParisFranceEurop").size()},  // maxLength 16
      {head + "<parameter=tags>\n[\"a\", \"b\", ", h + units(q, "<parameter=tags>\n[\"a\", \"b\"").size()},  // maxItems
      {head + "<parameter=opts>\n{\"n\": 1}", h + units(q, "<parameter=opts>\n{\"n\": 1").size()},  // hourly required
      {head + "<parameter=opts>\n{\"hourly\": 1}", h + units(q, "<parameter=opts>\n{\"hourly\": ").size()},
      {head + "<parameter=opts>\n{\"hourly\":  true}", h + units(q, "<parameter=opts>\n{\"hourly\": ").size()},
      {head + "<parameter=city>\nA\n</parameter>\n<parameter=city>",
       h + units(q, "<parameter=city>\nA\n</parameter>\n<parameter=").size()},  // written once
      {head + "<parameter=city>\n\x01", h + units(q, "<parameter=city>\n").size()},     // C0 control
      {head + "<parameter=city>\n\xC0\xAF", h + units(q, "<parameter=city>\n").size()},  // overlong UTF-8
  };
  for (const auto& c : cases) {
    auto s = grammar(q, Mode::kRequired)->start();
    EXPECT_EQ(accepted(s, q, c.text), c.taken) << c.text;
  }
  // 17 characters are one too many, unless the 17th is the newline the parser drops.
  auto s = grammar(q, Mode::kRequired)->start();
  const std::string ok = head + "<parameter=city>\nParisFranceEurop\n</parameter>\n";
  EXPECT_EQ(accepted(s, q, ok), units(q, ok).size());
}

TEST(ToolGrammar, NamedFunctionIsOneCallRequiredMayBeSeveral) {
  const Family q = Family::kQwen35;
  const std::string noop = "<tool_call>\n<function=noop>\n</function>\n</tool_call>";
  auto named = grammar(q, Mode::kFunction, false, "noop")->start();
  EXPECT_EQ(accepted(named, q, noop + "\n"), units(q, noop).size());  // only the stop may follow
  auto weather = grammar(q, Mode::kFunction, false, "get_weather")->start();
  EXPECT_EQ(accepted(weather, q, noop), units(q, "<tool_call>\n<function=").size());
  auto many = grammar(q, Mode::kRequired)->start();
  const std::string two = noop + "\n" + noop + kStop;
  EXPECT_EQ(accepted(many, q, two), units(q, two).size());
  EXPECT_TRUE(many.done());
  auto single = grammar(q, Mode::kRequired, false, "", /*parallel=*/false)->start();
  EXPECT_EQ(accepted(single, q, two), units(q, noop).size());
  EXPECT_THROW(grammar(q, Mode::kFunction, false, "nope"), InputError);
  ToolChoice c;
  c.mode = Mode::kRequired;
  EXPECT_THROW(ToolGrammar::build(q, {}, c, false, vocab_of(q)), InputError);
}

TEST(ToolGrammar, ReasoningFirstThenTheCall) {
  for (const auto& n : natives()) {
    const std::string think = "let me see</think>";
    std::string call = n.text;
    if (n.family == Family::kQwen35) call = "\n\n" + call;  // Qwen: </think>\n\n<tool_call>
    auto s = grammar(n.family, Mode::kRequired, true)->start();
    EXPECT_EQ(accepted(s, n.family, think + call), units(n.family, think + call).size()) << family_name(n.family);
    // Required: the turn may not end inside reasoning; none: it may.
    auto r = grammar(n.family, Mode::kRequired, true)->start();
    EXPECT_EQ(accepted(r, n.family, std::string("hm") + kStop), 2u);
    auto none = grammar(n.family, Mode::kNone, true)->start();
    EXPECT_EQ(accepted(none, n.family, std::string("hm") + kStop), 3u);
    EXPECT_TRUE(none.done());
  }
}

TEST(ToolGrammar, NoneNeverOpensACall) {
  struct Case {
    Family f;
    std::string open;
  };
  for (const Case& c : {Case{Family::kQwen35, "<tool_call>"}, Case{Family::kGlm5, "<tool_call>"},
                        Case{Family::kDeepSeekV4, "<｜DSML｜tool_calls>"}}) {
    auto g = grammar(c.f, Mode::kNone);
    auto s = g->start();
    EXPECT_EQ(accepted(s, c.f, "Sunny, 20 C.<STOP>"), units(c.f, "Sunny, 20 C.<STOP>").size());
    EXPECT_TRUE(s.done());
    // Neither the marker token nor the marker spelled in bytes.
    auto t = g->start();
    EXPECT_EQ(accepted(t, c.f, "ok " + c.open), units(c.f, "ok ").size() + (c.f == Family::kDeepSeekV4 ? 1 : 0));
    ToolGrammar::State st = g->start();
    size_t n = 0;
    for (char ch : "ok " + c.open) n += st.feed(static_cast<unsigned char>(ch)) ? 1 : 0;
    EXPECT_EQ(n, 3 + c.open.size() - 1) << "the marker's last byte is refused";
  }
}

TEST(ToolGrammar, JsonNumbersStringsAndEscapes) {
  const std::string tool = R"({"name":"f","parameters":{"type":"object","properties":{
      "x":{"type":"number"},"s":{"type":"array","items":{"type":"string","minLength":1}},"a":{}},"required":["x"]}})";
  ToolChoice c;
  c.mode = Mode::kRequired;
  auto g = ToolGrammar::build(Family::kGlm5, {tool}, c, false, vocab_of(Family::kGlm5));
  const std::string head = "<tool_call>f<arg_key>x</arg_key><arg_value>";
  for (const char* ok : {"-0.5e+3", "0", "12.25", "1E9"}) {
    auto s = g->start();
    const std::string t = head + ok + "</arg_value>";
    EXPECT_EQ(accepted(s, Family::kGlm5, t), units(Family::kGlm5, t).size()) << ok;
  }
  for (const char* bad : {"-", "1.", ".5", "1e", "+1", "0x1", "1e999"}) {
    auto s = g->start();
    const std::string t = head + bad + "</arg_value>";
    EXPECT_LT(accepted(s, Family::kGlm5, t), units(Family::kGlm5, t).size()) << bad;
  }
  const std::string x = head + "1</arg_value><arg_key>s</arg_key><arg_value>";
  for (const char* ok : {R"(["a\"b\u00e9\n"])", "[]", R"(["é"])"}) {
    auto s = g->start();
    const std::string t = x + ok + "</arg_value><arg_key>a</arg_key><arg_value>{\"k\": [null, false, {}]}</arg_value></tool_call><STOP>";
    EXPECT_EQ(accepted(s, Family::kGlm5, t), units(Family::kGlm5, t).size()) << ok;
    EXPECT_TRUE(s.done());
  }
  for (const char* bad : {R"([""])", R"(["\x"])", R"(["\ud800"])", "[\"a\nb\"]"}) {
    auto s = g->start();
    const std::string t = x + bad + "</arg_value>";
    EXPECT_LT(accepted(s, Family::kGlm5, t), units(Family::kGlm5, t).size()) << bad;
  }
}

}  // namespace
}  // namespace ds4::tok
