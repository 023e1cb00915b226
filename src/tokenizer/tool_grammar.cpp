// Builds the tables of a ToolGrammar: the family's native call format (the same text the
// family template renders for an assistant tool call, so the model writes what it was
// trained on) and each tool's argument schema. The State machine is grammar_state.cpp.
#include "tokenizer/tool_grammar.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "tokenizer/template_util.h"

namespace ds4::tok {

const char* tool_choice_name(ToolChoice::Mode m) {
  switch (m) {
    case ToolChoice::Mode::kAuto: return "auto";
    case ToolChoice::Mode::kNone: return "none";
    case ToolChoice::Mode::kRequired: return "required";
    case ToolChoice::Mode::kFunction: return "function";
  }
  return "auto";
}

namespace {

using json = nlohmann::json;

// One family's call block, piece by piece (see the family templates and tool_call_parse.cpp).
struct Format {
  std::string open_first, open_after_reasoning, open_next;  // up to the function name
  std::string name_suffix;                                  // after the name
  std::string param_open, param_mid_raw, param_mid_json;    // param_open KEY mid
  std::string close;                                        // ends one call
  std::string raw_term;                                     // ends a raw (string) value
  std::vector<std::string> raw_avoid;                       // markers the parser finds first
  std::string raw_after, raw_enum_sep, json_after;
  std::string end;                                          // after the last call, before the stop
  std::string tool_open;                                    // the parser's opening marker
  bool escape_attr = false;                                 // DSML: names are XML attributes
  int max_calls = 8;
};

Format format_of(Family f) {
  Format x;
  switch (f) {
    case Family::kQwen35:
      // <tool_call>\n<function=NAME>\n<parameter=KEY>\nVALUE\n</parameter>\n</function>\n</tool_call>
      x.open_first = "<tool_call>\n<function=";
      x.open_after_reasoning = "\n\n<tool_call>\n<function=";
      x.open_next = "\n<tool_call>\n<function=";
      x.name_suffix = ">\n";
      x.param_open = "<parameter=";
      x.param_mid_raw = x.param_mid_json = ">\n";
      x.close = "</function>\n</tool_call>";
      x.raw_term = "</parameter>";
      x.raw_avoid = {"</function>", "</tool_call>"};
      x.raw_after = "\n";
      x.raw_enum_sep = "\n";  // the template writes "\n" VALUE "\n</parameter>"
      x.json_after = "\n</parameter>\n";
      x.tool_open = "<tool_call>";
      break;
    case Family::kGlm5:
      // <tool_call>NAME<arg_key>KEY</arg_key><arg_value>VALUE</arg_value></tool_call>
      x.open_first = x.open_after_reasoning = x.open_next = "<tool_call>";
      x.param_open = "<arg_key>";
      x.param_mid_raw = x.param_mid_json = "</arg_key><arg_value>";
      x.close = "</tool_call>";
      x.raw_term = "</arg_value>";
      x.raw_avoid = {"</tool_call>"};
      x.json_after = "</arg_value>";
      x.tool_open = "<tool_call>";
      break;
    case Family::kDeepSeekV4:
      // \n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name="NAME">\n<｜DSML｜parameter name="KEY"
      // string="true|false">VALUE</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>
      x.open_first = x.open_after_reasoning = "\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"";
      x.open_next = "<｜DSML｜invoke name=\"";
      x.name_suffix = "\">\n";
      x.param_open = "<｜DSML｜parameter name=\"";
      x.param_mid_raw = "\" string=\"true\">";
      x.param_mid_json = "\" string=\"false\">";
      x.close = "</｜DSML｜invoke>\n";
      x.raw_term = "</｜DSML｜parameter>";
      x.raw_avoid = {"</｜DSML｜invoke>", "</｜DSML｜tool_calls>"};
      x.raw_after = "\n";
      x.json_after = "</｜DSML｜parameter>\n";
      x.end = "</｜DSML｜tool_calls>";
      x.tool_open = "<｜DSML｜tool_calls>";
      x.escape_attr = true;
      break;
  }
  return x;
}

}  // namespace

// Fills a ToolGrammar's tables (a friend: the tables are private to the State).
class GrammarBuilder {
 public:
  GrammarBuilder(ToolGrammar& g, const GrammarVocab& v) : g_(g) {
    controls_ = v.controls;
    std::sort(controls_.begin(), controls_.end(),
              [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
    for (const auto& [text, id] : controls_) g_.control_text_[kControlBase + id] = text;
  }

  // Text -> units: a control token's text becomes that token (longest match first), the
  // way the template's text is encoded with special tokens allowed.
  std::vector<int32_t> units(std::string_view text) const {
    std::vector<int32_t> u;
    for (size_t i = 0; i < text.size();) {
      bool hit = false;
      for (const auto& [t, id] : controls_) {
        if (!t.empty() && text.compare(i, t.size(), t) == 0) {
          u.push_back(kControlBase + id);
          i += t.size();
          hit = true;
          break;
        }
      }
      if (!hit) u.push_back(int32_t(static_cast<unsigned char>(text[i++])));
    }
    return u;
  }
  int lit(const std::string& text) {
    if (text.empty()) return -1;
    g_.lits_.push_back(units(text));
    return int(g_.lits_.size() - 1);
  }
  int set(std::vector<std::vector<int32_t>> cands) {
    ToolGrammar::LitSet s;
    std::vector<int> order(cands.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = int(i);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return cands[size_t(a)] < cands[size_t(b)]; });
    for (int i : order) {
      s.cands.push_back(cands[size_t(i)]);
      s.orig.push_back(i);
    }
    g_.sets_.push_back(std::move(s));
    return int(g_.sets_.size() - 1);
  }
  int text(ToolGrammar::TextSpec spec) {
    g_.texts_.push_back(std::move(spec));
    return int(g_.texts_.size() - 1);
  }

  // Appends a function's compiled schema to the shared node table; returns its root.
  int add_schema(const SchemaGraph& sg) {
    const int off = int(g_.nodes_.size());
    for (SchemaNode n : sg.nodes) {
      for (auto& p : n.props) p.node += off;
      if (n.extra >= 0) n.extra += off;
      if (n.items >= 0) n.items += off;
      for (auto& a : n.alts) a += off;
      g_.nodes_.push_back(std::move(n));
    }
    return sg.root + off;
  }

  void finish_nodes() {
    g_.enum_set_.assign(g_.nodes_.size(), -1);
    g_.key_set_.assign(g_.nodes_.size(), -1);
    for (size_t i = 0; i < g_.nodes_.size(); ++i) {
      if (g_.nodes_[i].kind == SchemaNode::Kind::kObject && !g_.nodes_[i].props.empty()) {
        // A key after its opening quote: the JSON-escaped name and the closing quote.
        std::vector<std::vector<int32_t>> keys;
        for (const auto& p : g_.nodes_[i].props) keys.push_back(bytes(json(p.name).dump().substr(1)));
        g_.key_set_[i] = set(std::move(keys));
      }
      if (g_.nodes_[i].kind != SchemaNode::Kind::kEnum) continue;
      std::vector<std::vector<int32_t>> c;
      for (const auto& t : g_.nodes_[i].enum_json) c.push_back(bytes(t));
      g_.enum_set_[i] = set(std::move(c));
    }
    g_.lit_true_ = lit("true");
    g_.lit_false_ = lit("false");
    g_.lit_null_ = lit("null");
  }

  static std::vector<int32_t> bytes(std::string_view s) {
    std::vector<int32_t> u;
    for (char c : s) u.push_back(int32_t(static_cast<unsigned char>(c)));
    return u;
  }

 private:
  ToolGrammar& g_;
  std::vector<std::pair<std::string, int32_t>> controls_;
};

namespace {

struct Tool {
  std::string name;
  json parameters;
};

std::vector<Tool> read_tools(const std::vector<std::string>& tools) {
  std::vector<Tool> out;
  for (size_t i = 0; i < tools.size(); ++i) {
    const std::string where = "tools[" + std::to_string(i) + "]";
    json t = json::parse(tools[i], nullptr, false);
    if (!t.is_object()) throw InputError(where + " must be a JSON object");
    const json& fn = t.contains("function") && t["function"].is_object() ? t["function"] : t;
    if (!fn.contains("name") || !fn["name"].is_string() || fn["name"].get<std::string>().empty())
      throw InputError(where + " needs a non-empty string 'name'");
    json params = fn.contains("parameters") && !fn["parameters"].is_null() ? fn["parameters"] : json::object();
    out.push_back({fn["name"].get<std::string>(), std::move(params)});
  }
  return out;
}

}  // namespace

std::shared_ptr<const ToolGrammar> ToolGrammar::build(Family family, const std::vector<std::string>& tools,
                                                      const ToolChoice& choice, bool starts_in_reasoning,
                                                      const GrammarVocab& vocab) {
  auto g = std::shared_ptr<ToolGrammar>(new ToolGrammar());
  GrammarBuilder b(*g, vocab);
  const Format fmt = format_of(family);
  g->mode_ = choice.mode;
  // Shared nodes: 0 any value, 1 an object of anything, 2 an array of anything.
  g->nodes_.resize(3);
  g->nodes_[1].kind = SchemaNode::Kind::kObject;
  g->nodes_[1].extra = 0;
  g->nodes_[2].kind = SchemaNode::Kind::kArray;
  g->nodes_[2].items = 0;
  const bool none = choice.mode == ToolChoice::Mode::kNone;
  if (starts_in_reasoning) g->reasoning_text_ = b.text({"</think>", {}, 0, -1, none});
  if (choice.mode == ToolChoice::Mode::kAuto) throw Error("tool_choice auto is not constrained: no grammar to build");
  if (none) {
    g->content_text_ = b.text({"", {fmt.tool_open}, 0, -1, true});
    b.finish_nodes();
    return g;
  }
  const std::vector<Tool> all = read_tools(tools);
  if (all.empty()) throw InputError("tool_choice '" + std::string(tool_choice_name(choice.mode)) + "' needs tools");
  std::vector<const Tool*> callable;
  for (const auto& t : all)
    if (choice.mode != ToolChoice::Mode::kFunction || t.name == choice.function) callable.push_back(&t);
  if (callable.empty())
    throw InputError("tool_choice names function '" + choice.function + "', which is not among the tools");
  std::vector<std::vector<int32_t>> names;
  for (const Tool* t : callable) {
    FnFmt f;
    f.name = t->name;
    const SchemaGraph sg = SchemaGraph::compile(t->parameters, "tool '" + t->name + "' parameters");
    const int root = b.add_schema(sg);
    std::vector<std::vector<int32_t>> opens;
    const SchemaNode top = g->nodes_[size_t(root)];  // a copy: add_schema may grow nodes_
    for (size_t i = 0; i < top.props.size(); ++i) {
      const auto& p = top.props[i];
      const SchemaNode& n = g->nodes_[size_t(p.node)];
      ParamFmt pf;
      pf.node = p.node;
      const bool raw = node_is_string(n);
      if (raw && n.kind == SchemaNode::Kind::kEnum) {
        std::vector<std::vector<int32_t>> vals;
        for (const auto& s : n.enum_json)
          vals.push_back(b.units(json::parse(s).get<std::string>() + fmt.raw_enum_sep + fmt.raw_term + fmt.raw_after));
        pf.form = ParamFmt::Form::kRawEnum;
        pf.set = b.set(std::move(vals));
      } else if (raw) {
        pf.form = ParamFmt::Form::kRaw;
        pf.text = b.text({fmt.raw_term, fmt.raw_avoid, n.min_len, n.max_len, false, !fmt.raw_enum_sep.empty()});
        pf.after = b.lit(fmt.raw_after);
      }
      if (!raw) pf.after = b.lit(fmt.json_after);
      const std::string key = fmt.escape_attr ? xml_attr_escape(p.name) : p.name;
      opens.push_back(b.units(fmt.param_open + key + (raw ? fmt.param_mid_raw : fmt.param_mid_json)));
      if (p.required) f.required |= uint64_t(1) << i;
      f.params.push_back(pf);
    }
    opens.push_back(b.units(fmt.close));
    f.param_set = b.set(std::move(opens));
    names.push_back(b.units((fmt.escape_attr ? xml_attr_escape(t->name) : t->name) + fmt.name_suffix));
    g->fns_.push_back(std::move(f));
  }
  g->name_set_ = b.set(std::move(names));
  g->open_first_ = b.lit(starts_in_reasoning ? fmt.open_after_reasoning : fmt.open_first);
  std::vector<int32_t> end = b.units(fmt.end);
  end.push_back(kStopUnit);
  g->after_end_ = b.set({end});
  g->after_more_ = b.set({end, b.units(fmt.open_next)});  // index 0 ends, 1 opens another
  const bool many = choice.mode == ToolChoice::Mode::kRequired && choice.parallel;
  g->max_calls_ = many ? fmt.max_calls : 1;
  b.finish_nodes();
  return g;
}

ToolGrammar::State ToolGrammar::start() const {
  State s;
  s.g_ = this;
  // The root frame sequences reasoning -> content or calls (root_resume).
  s.push(s.make(/*kRoot*/ 0, 0));
  s.root_resume(s.frames_[0]);
  return s;
}

}  // namespace ds4::tok
