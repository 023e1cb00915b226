#include <gtest/gtest.h>

#include <algorithm>

#include "core/error.h"
#include "tiny_tokenizer.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/template_util.h"

namespace ds4::tok {
namespace {

Tokenizer make_tiny() { return Tokenizer::from_json(test::tiny_tokenizer_json(), "tiny"); }

Conversation one_turn() {
  Conversation c;
  c.messages = {{"user", "hello", "", {}, "", ""}};
  return c;
}

TEST(ChatTemplate, QwenContinuationAppendsTemplateNewlineAfterEos) {
  auto tok = make_tiny();
  auto tmpl = ChatTemplate::create(Family::kQwen35, tok);
  Conversation c = one_turn();
  c.thinking = Thinking::kOff;
  auto prompt = tmpl->render_tokens(c);
  // The model answers "hello" and stops on <|im_end|>.
  std::vector<TokenId> history = prompt;
  for (auto id : tok.encode("hello")) history.push_back(id);
  history.push_back(tok.str_to_token("<|im_end|>"));
  c.messages.push_back({"assistant", "hello", "", {}, "", ""});
  c.messages.push_back({"user", "world", "", {}, "", ""});
  auto cont = tmpl->render_continuation(history, c);
  EXPECT_EQ(cont.keep, history.size());
  ASSERT_FALSE(cont.append.empty());
  EXPECT_EQ(tok.decode({cont.append[0]}), "\n");  // the newline the audited app lost
  std::vector<TokenId> joined = history;
  joined.insert(joined.end(), cont.append.begin(), cont.append.end());
  EXPECT_EQ(joined, tmpl->render_tokens(c));

  // Same through the engine-facing helper: parsed generation + next user text.
  Conversation first = one_turn();
  first.thinking = Thinking::kOff;
  auto via = tmpl->append_user_turn(history, first, parse_output(Family::kQwen35, false, "hello"), "world");
  EXPECT_EQ(via.keep, cont.keep);
  EXPECT_EQ(via.append, cont.append);
}

TEST(ChatTemplate, RejectsWhatTheFamilyCannotRender) {
  auto tok = make_tiny();
  auto tmpl = ChatTemplate::create(Family::kQwen35, tok);
  Conversation c = one_turn();
  c.messages.push_back({"system", "late", "", {}, "", ""});
  EXPECT_THROW(tmpl->render(c), InputError);
  c.messages = {{"wizard", "x", "", {}, "", ""}};
  EXPECT_THROW(tmpl->render(c), InputError);
  // The tiny vocabulary has no DeepSeek control tokens.
  EXPECT_THROW(ChatTemplate::create(Family::kDeepSeekV4, tok), InputError);
  EXPECT_THROW(family_from_name("llama"), InputError);
}

TEST(OutputParser, SplitsReasoningContentAndToolCalls) {
  auto p = parse_output(Family::kQwen35, true,
                        "plan it\n</think>\n\nCalling.\n\n<tool_call>\n<function=get_weather>\n"
                        "<parameter=city>\nParis\n</parameter>\n<parameter=days>\n3\n</parameter>\n"
                        "</function>\n</tool_call>");
  EXPECT_EQ(p.reasoning, "plan it");
  EXPECT_EQ(p.content, "Calling.");
  ASSERT_EQ(p.tool_calls.size(), 1u);
  EXPECT_EQ(p.tool_calls[0].name, "get_weather");
  EXPECT_EQ(p.tool_calls[0].arguments, R"({"city":"Paris","days":3})");

  auto g = parse_output(Family::kGlm5, true,
                        "why</think>ok<tool_call>run<arg_key>code</arg_key><arg_value>x = 1</arg_value>"
                        "<arg_key>n</arg_key><arg_value>[1, 2]</arg_value></tool_call>");
  EXPECT_EQ(g.reasoning, "why");
  EXPECT_EQ(g.content, "ok");
  ASSERT_EQ(g.tool_calls.size(), 1u);
  EXPECT_EQ(g.tool_calls[0].arguments, R"({"code":"x = 1","n":[1,2]})");

  auto d = parse_output(Family::kDeepSeekV4, false,
                        "Sure.\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"sh\">\n"
                        "<｜DSML｜parameter name=\"cmd\" string=\"true\">a && b &lt;/｜DSML｜parameter></｜DSML｜parameter>\n"
                        "<｜DSML｜parameter name=\"n\" string=\"false\">{\"k\": [1]}</｜DSML｜parameter>\n"
                        "</｜DSML｜invoke>\n</｜DSML｜tool_calls>");
  EXPECT_EQ(d.content, "Sure.");
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_EQ(d.tool_calls[0].arguments, R"({"cmd":"a && b </｜DSML｜parameter>","n":{"k":[1]}})");
}

TEST(OutputParser, AnyChunkingGivesTheSameResult) {
  const std::string text =
      "r\xC3\xA9sum\xC3\xA9 </think>\n\nA\xE2\x82\xAC <tool_call>\n<function=f>\n<parameter=a>\n1\n"
      "</parameter>\n</function>\n</tool_call>\n<tool_call>\n<function=g>\n</function>\n</tool_call> tail";
  auto whole = parse_output(Family::kQwen35, true, text);
  ASSERT_EQ(whole.tool_calls.size(), 2u);
  for (size_t chunk = 1; chunk <= 9; ++chunk) {
    auto p = OutputParser::create(Family::kQwen35, true);
    ParsedOutput got;
    auto take = [&](const std::vector<ParseEvent>& ev) {
      for (const auto& e : ev) {
        if (e.kind == ParseEvent::Kind::kReasoning) got.reasoning += e.text;
        else if (e.kind == ParseEvent::Kind::kContent) got.content += e.text;
        else got.tool_calls.push_back(e.call);
        // Deltas are never cut inside a UTF-8 character.
        EXPECT_EQ(utf8_lossy(e.text), e.text);
      }
    };
    for (size_t i = 0; i < text.size(); i += chunk) take(p->feed(text.substr(i, chunk)));
    take(p->finish());
    EXPECT_EQ(got.reasoning, whole.reasoning) << chunk;
    EXPECT_EQ(got.content, whole.content) << chunk;
    EXPECT_EQ(got.tool_calls.size(), whole.tool_calls.size()) << chunk;
  }
}

TEST(OutputParser, TruncatedMalformedOrForeignCallsAreErrorsNotText) {
  const std::string text = "ok <tool_call>\n<function=f>\n<parameter=a>\n1";
  const size_t open = text.find("<tool_call>");
  for (size_t cut = 0; cut <= text.size(); ++cut) {
    auto p = parse_output(Family::kQwen35, false, text.substr(0, cut));
    EXPECT_TRUE(p.tool_calls.empty());
    if (cut < open + 11) {
      // No complete opening marker yet: plain text (a prefix of one is held, then released).
      EXPECT_TRUE(p.tool_errors.empty()) << cut;
      continue;
    }
    EXPECT_EQ(p.content, "ok") << cut;
    ASSERT_EQ(p.tool_errors.size(), 1u) << cut;
    EXPECT_EQ(p.tool_errors[0].error_type, "truncated");
    EXPECT_EQ(p.tool_errors[0].text, text.substr(open, cut - open));
  }
  auto bad = parse_output(Family::kGlm5, false, "<tool_call><arg_key>x</arg_key></tool_call>");
  EXPECT_TRUE(bad.tool_calls.empty());
  EXPECT_EQ(bad.content, "");
  ASSERT_EQ(bad.tool_errors.size(), 1u);
  EXPECT_EQ(bad.tool_errors[0].error_type, "malformed");
  EXPECT_EQ(bad.tool_errors[0].text, "<tool_call><arg_key>x</arg_key></tool_call>");
  auto bad_ds = parse_output(Family::kDeepSeekV4, false,
                             "<｜DSML｜tool_calls><｜DSML｜invoke name=\"f\">\n<｜DSML｜parameter name=\"a\" "
                             "string=\"false\">{oops</｜DSML｜parameter>\n</｜DSML｜invoke></｜DSML｜tool_calls>");
  EXPECT_TRUE(bad_ds.tool_calls.empty());
  ASSERT_EQ(bad_ds.tool_errors.size(), 1u);
  EXPECT_NE(bad_ds.tool_errors[0].text.find("{oops"), std::string::npos);
  // Qwen's JSON-in-tags style (Hermes) inside Qwen's markers is not this model's format.
  auto hermes = parse_output(Family::kQwen35, false, "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>");
  ASSERT_EQ(hermes.tool_errors.size(), 1u);
  EXPECT_EQ(hermes.tool_errors[0].error_type, "malformed");
  // Another family's markers: an error when the request has tools, text when it has none.
  const std::string tools = R"({"type":"function","function":{"name":"f","parameters":{}}})";
  const std::string dsml = "a <｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\n</｜DSML｜invoke>\n</｜DSML｜tool_calls> b";
  auto foreign = parse_output(Family::kQwen35, false, dsml, {tools});
  ASSERT_EQ(foreign.tool_errors.size(), 1u);
  EXPECT_EQ(foreign.tool_errors[0].error_type, "foreign_format");
  EXPECT_EQ(foreign.content, "ab");
  EXPECT_EQ(parse_output(Family::kQwen35, false, dsml).content, dsml);
  auto glm_in_ds = parse_output(Family::kDeepSeekV4, false, "<tool_call>f<arg_key>a", {tools});
  ASSERT_EQ(glm_in_ds.tool_errors.size(), 1u);
  EXPECT_EQ(glm_in_ds.tool_errors[0].text, "<tool_call>f<arg_key>a");
}

TEST(OutputParser, StringArgumentsStayTextWhenTheSchemaSaysSo) {
  const std::string tools = R"({"type":"function","function":{"name":"f","parameters":{"type":"object",
      "properties":{"zip":{"type":"string"},"n":{"type":"integer"},"c":{"enum":["1","2"]}}}}})";
  const std::string q = "<tool_call>\n<function=f>\n<parameter=zip>\n01234\n</parameter>\n<parameter=n>\n7\n"
                        "</parameter>\n<parameter=c>\n2\n</parameter>\n</function>\n</tool_call>";
  EXPECT_EQ(parse_output(Family::kQwen35, false, q, {tools}).tool_calls.at(0).arguments,
            R"({"zip":"01234","n":7,"c":"2"})");
  // Without the schema the bare value reads as JSON where it parses.
  EXPECT_EQ(parse_output(Family::kQwen35, false, q).tool_calls.at(0).arguments, R"({"zip":"01234","n":7,"c":2})");
  const std::string g = "<tool_call>f<arg_key>zip</arg_key><arg_value>123</arg_value></tool_call>";
  EXPECT_EQ(parse_output(Family::kGlm5, false, g, {tools}).tool_calls.at(0).arguments, R"({"zip":"123"})");
}

}  // namespace
}  // namespace ds4::tok

namespace ds4::tok {
namespace {

// JSON text from clients and the model is checked for depth before it is parsed: deeper text
// once overflowed the stack when the parsed value was rendered recursively (py_json).
TEST(TemplateJson, DeeplyNestedArgumentsAreAClearErrorNotACrash) {
  const std::string deep = "{\"a\":" + std::string(5000, '[') + std::string(5000, ']') + "}";
  try {
    parse_object(deep, "tool call 'f' arguments");
    FAIL() << "5000 levels must be refused";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("nested deeper than 128"), std::string::npos) << e.what();
  }
  const std::string ok = "{\"a\":" + std::string(100, '[') + std::string(100, ']') + "}";
  EXPECT_EQ(py_json(parse_object(ok, "args")).size(), ok.size() + 1);  // py_json writes "a": with a space
  // Brackets inside strings do not count; malformed text reports its byte, not the library's text.
  EXPECT_NO_THROW(parse_object("{\"s\":\"" + std::string(500, '[') + "\"}", "args"));
  try {
    parse_object("{not json", "args");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("args: not valid JSON (at byte ", 0), 0u) << e.what();
    EXPECT_EQ(std::string(e.what()).find("json.exception"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ds4::tok
