#include "server/tool_choice.h"

#include <algorithm>
#include <limits>

#include "core/error.h"
#include "server/api_common.h"
#include "tokenizer/json_schema.h"
#include "tokenizer/tool_grammar.h"

namespace ds4::server {

namespace {

std::string at(size_t i, const char* field) { return "tools[" + std::to_string(i) + "]." + field; }

std::vector<std::string> tool_names(const std::vector<std::string>& tools) {
  std::vector<std::string> names;
  for (const auto& t : tools) {
    json j = json::parse(t, nullptr, false);
    const json& fn = j.is_object() && j.contains("function") && j["function"].is_object() ? j["function"] : j;
    if (fn.is_object() && fn.contains("name") && fn["name"].is_string()) names.push_back(fn["name"].get<std::string>());
  }
  return names;
}

// The fewest nested arrays / objects a value of each node of a compiled schema needs (0: a
// scalar will do; kNoValue: no value at all): a least fixpoint over the graph, so a $ref cycle
// with no way out (an object that requires itself) has none, as the grammar could never
// finish such a value either.
constexpr int kNoValue = std::numeric_limits<int>::max();

int node_nesting(const tok::SchemaNode& n, const std::vector<int>& need) {
  using Kind = tok::SchemaNode::Kind;
  switch (n.kind) {
    case Kind::kString:
      return n.max_len < 0 || n.min_len <= n.max_len ? 0 : kNoValue;
    case Kind::kEnum:
      return n.enum_json.empty() ? kNoValue : 0;
    case Kind::kObject: {
      int deepest = 0;
      for (const auto& p : n.props)
        if (p.required) deepest = std::max(deepest, need[size_t(p.node)]);
      return deepest == kNoValue ? kNoValue : 1 + deepest;
    }
    case Kind::kArray: {
      if (n.max_items >= 0 && n.min_items > n.max_items) return kNoValue;
      const int item = n.min_items == 0 || n.items < 0 ? 0 : need[size_t(n.items)];
      return item == kNoValue ? kNoValue : 1 + item;
    }
    case Kind::kUnion: {
      int least = kNoValue;
      for (int a : n.alts) least = std::min(least, need[size_t(a)]);
      return least;
    }
    default:
      return 0;
  }
}

std::vector<int> nesting(const tok::SchemaGraph& g) {
  std::vector<int> need(g.nodes.size(), kNoValue);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t i = 0; i < g.nodes.size(); ++i)
      if (const int v = node_nesting(g.nodes[i], need); v < need[i]) need[i] = v, changed = true;
  }
  return need;
}

// A forced call (required / a named function) is decoded under the tool-call grammar: a tool
// the model may be made to call whose parameters no value satisfies would dead-end the turn
// mid-stream, after the 200 is sent. Refused here, before the response begins.
void check_forced_schemas(const std::vector<std::string>& tools, const tok::ToolChoice& c) {
  if (c.mode != tok::ToolChoice::Mode::kRequired && c.mode != tok::ToolChoice::Mode::kFunction) return;
  for (const auto& t : tools) {
    const json j = json::parse(t, nullptr, false);
    const json& fn = j.is_object() && j.contains("function") && j["function"].is_object() ? j["function"] : j;
    if (!fn.is_object() || !fn.contains("name") || !fn["name"].is_string()) continue;
    const std::string name = fn["name"].get<std::string>();
    if (c.mode == tok::ToolChoice::Mode::kFunction && name != c.function) continue;
    const json params = fn.contains("parameters") && !fn["parameters"].is_null() ? fn["parameters"] : json::object();
    tok::SchemaGraph g;
    try {
      g = tok::SchemaGraph::compile(params, "tool '" + name + "' parameters");
    } catch (const InputError& e) {
      fail(e.what(), "tools");
    }
    // Every node has a value: the grammar may enter any of them (it offers an optional
    // property, an array item or a union alternative without looking ahead), and one without
    // a value is a dead end there, so an unsatisfiable part anywhere is as fatal as at the root.
    const std::vector<int> need = nesting(g);
    if (std::find(need.begin(), need.end(), kNoValue) != need.end())
      fail("tool_choice forces a call of '" + name +
               "', but a part of its parameters schema has no valid "
               "value (e.g. minLength over maxLength): the constrained decoder could never complete that call",
           "tool_choice");
    // The grammar's frame stack bounds how deep a parameter's JSON value may nest: a required
    // parameter whose value needs more levels dead-ended mid-turn (a 500, or an error event
    // after the 200 of a stream).
    const tok::SchemaNode& top = g.nodes[size_t(g.root)];
    if (top.kind == tok::SchemaNode::Kind::kObject)
      for (const auto& p : top.props)
        if (p.required && need[size_t(p.node)] > tok::ToolGrammar::kMaxJsonNesting)
          fail("tool_choice forces a call of '" + name + "', but its required parameter '" + p.name +
                   "' nests arrays / objects " + std::to_string(need[size_t(p.node)]) +
                   " levels deep; the constrained decoder writes at most " +
                   std::to_string(tok::ToolGrammar::kMaxJsonNesting),
               "tool_choice");
  }
}

tok::ToolChoice from_string(const std::string& s) {
  tok::ToolChoice c;
  if (s == "auto") c.mode = tok::ToolChoice::Mode::kAuto;
  else if (s == "none") c.mode = tok::ToolChoice::Mode::kNone;
  else if (s == "required") c.mode = tok::ToolChoice::Mode::kRequired;
  else fail("tool_choice '" + s + "' is not one of auto, none, required (or a function object)", "tool_choice");
  return c;
}

tok::ToolChoice openai_choice(const json& v, Protocol p) {
  if (v.is_string()) return from_string(v.get<std::string>());
  if (!v.is_object()) fail("'tool_choice' must be a string or an object", "tool_choice");
  const auto type = get_string(v, "type");
  if (type != "function") fail("tool_choice.type must be 'function'", "tool_choice.type");
  tok::ToolChoice c;
  c.mode = tok::ToolChoice::Mode::kFunction;
  // Chat Completions nests the name in "function"; the Responses API puts it on the object.
  if (p == Protocol::kChat) {
    const json* fn = get_object(v, "function");
    if (!fn) fail("tool_choice.function is required", "tool_choice.function");
    auto name = get_string(*fn, "name");
    if (!name) fail("tool_choice.function.name is required", "tool_choice.function.name");
    c.function = *name;
  } else {
    auto name = get_string(v, "name");
    if (!name) fail("tool_choice.name is required", "tool_choice.name");
    c.function = *name;
  }
  return c;
}

tok::ToolChoice anthropic_choice(const json& v) {
  if (!v.is_object()) fail("'tool_choice' must be an object", "tool_choice");
  const auto type = get_string(v, "type");
  if (!type) fail("tool_choice.type is required", "tool_choice.type");
  tok::ToolChoice c;
  if (*type == "auto") c.mode = tok::ToolChoice::Mode::kAuto;
  else if (*type == "any") c.mode = tok::ToolChoice::Mode::kRequired;
  else if (*type == "none") c.mode = tok::ToolChoice::Mode::kNone;
  else if (*type == "tool") {
    c.mode = tok::ToolChoice::Mode::kFunction;
    auto name = get_string(v, "name");
    if (!name) fail("tool_choice.name is required for type 'tool'", "tool_choice.name");
    c.function = *name;
  } else {
    fail("tool_choice.type '" + *type + "' is not one of auto, any, tool, none", "tool_choice.type");
  }
  if (auto d = get_bool(v, "disable_parallel_tool_use")) c.parallel = !*d;
  return c;
}

}  // namespace

void check_tool_types(const json& body, Protocol p) {
  const json* tools = get_array(body, "tools");
  if (!tools) return;
  for (size_t i = 0; i < tools->size(); ++i) {
    const json& t = (*tools)[i];
    if (!t.is_object()) fail("'tools[" + std::to_string(i) + "]' must be an object", "tools[" + std::to_string(i) + "]");
    auto it = t.find("type");
    const bool absent = it == t.end() || it->is_null();
    if (!absent && !it->is_string()) fail("'" + at(i, "type") + "' must be a string", at(i, "type"));
    const std::string type = absent ? "" : it->get<std::string>();
    const bool ok = p == Protocol::kMessages ? (absent || type == "custom")
                                             : (type == "function" || (absent && p == Protocol::kChat));
    if (!ok)
      fail("tool type '" + type + "' in '" + at(i, "type") + "' is not supported (" +
               (p == Protocol::kMessages ? "custom tools only" : "function tools only") + ")",
           at(i, "type"));
  }
}

void read_tool_choice(const json& body, Protocol p, engine::GenRequest& r) {
  auto it = body.find("tool_choice");
  tok::ToolChoice c;
  if (it != body.end() && !it->is_null()) c = p == Protocol::kMessages ? anthropic_choice(*it) : openai_choice(*it, p);
  if (p != Protocol::kMessages)
    if (auto par = get_bool(body, "parallel_tool_calls")) c.parallel = *par;
  const auto names = tool_names(r.conv.tools);
  if ((c.mode == tok::ToolChoice::Mode::kRequired || c.mode == tok::ToolChoice::Mode::kFunction) && names.empty())
    fail(std::string("tool_choice '") + tok::tool_choice_name(c.mode) + "' needs at least one tool in 'tools'", "tool_choice");
  if (c.mode == tok::ToolChoice::Mode::kFunction && std::find(names.begin(), names.end(), c.function) == names.end())
    fail("tool_choice names function '" + c.function + "', which is not among the tools", "tool_choice");
  // Without tools the model is shown none, and there is nothing to keep it from calling.
  if (c.mode == tok::ToolChoice::Mode::kNone && names.empty()) c.mode = tok::ToolChoice::Mode::kAuto;
  check_forced_schemas(r.conv.tools, c);
  r.tool_choice = c;
}

void read_speculative(const json& body, engine::GenRequest& r) {
  const json* s = get_object(body, "speculative");
  if (!s) return;
  for (auto it = s->begin(); it != s->end(); ++it)
    if (it.key() != "enabled" && it.key() != "depth")
      fail("unknown field 'speculative." + it.key() + "' (enabled, depth)", "speculative." + it.key());
  auto f = s->find("enabled");
  if (f != s->end() && !f->is_null()) {
    if (!f->is_boolean()) fail("'speculative.enabled' must be a boolean", "speculative.enabled");
    r.spec_enabled = f->get<bool>();
  }
  f = s->find("depth");
  if (f != s->end() && !f->is_null()) {
    if (!f->is_number_integer()) fail("'speculative.depth' must be an integer", "speculative.depth");
    const int64_t d = f->get<int64_t>();
    if (d < 1 || d > 5) fail("'speculative.depth' must be in 1..5, got " + std::to_string(d), "speculative.depth");
    r.spec_depth = int(d);
  }
}

json tool_call_error_json(const std::vector<engine::GenEvent>& errors) {
  if (errors.empty()) return nullptr;
  const auto& e = errors.front();
  return {{"type", e.error_type}, {"message", e.error}, {"text", e.text}};
}

json tool_choice_echo(const tok::ToolChoice& c) {
  if (c.mode == tok::ToolChoice::Mode::kFunction) return {{"type", "function"}, {"name", c.function}};
  return tok::tool_choice_name(c.mode);
}

}  // namespace ds4::server
