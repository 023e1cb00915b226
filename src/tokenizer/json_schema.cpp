#include "tokenizer/json_schema.h"

#include <map>

#include "core/error.h"

namespace ds4::tok {

namespace {

using json = nlohmann::json;
using Kind = SchemaNode::Kind;

// Which first bytes a value of a node may start with, as a bitset over the JSON value
// classes; a union keeps only alternatives whose classes do not overlap, so the grammar can
// pick the branch from the first byte and never needs to follow two at once.
enum : unsigned { kStr = 1, kNum = 2, kTrue = 4, kFalse = 8, kNul = 16, kObj = 32, kArr = 64, kAll = 127 };

unsigned class_of_text(const std::string& t) {
  switch (t.empty() ? ' ' : t[0]) {
    case '"': return kStr;
    case 't': return kTrue;
    case 'f': return kFalse;
    case 'n': return kNul;
    case '{': return kObj;
    case '[': return kArr;
    default: return kNum;
  }
}

class Compiler {
 public:
  Compiler(const json& root, std::string where) : root_(root), where_(std::move(where)) {
    g_.nodes.push_back({});  // node 0: anything
  }
  SchemaGraph run() {
    g_.root = node(root_, 0);
    return std::move(g_);
  }

 private:
  unsigned classes(int n) const {
    const SchemaNode& s = g_.nodes[size_t(n)];
    switch (s.kind) {
      case Kind::kAny: return kAll;
      case Kind::kString: return kStr;
      case Kind::kNumber:
      case Kind::kInteger: return kNum;
      case Kind::kBoolean: return kTrue | kFalse;
      case Kind::kNull: return kNul;
      case Kind::kObject: return kObj;
      case Kind::kArray: return kArr;
      case Kind::kEnum: {
        unsigned c = 0;
        for (const auto& t : s.enum_json) c |= class_of_text(t);
        return c;
      }
      case Kind::kUnion: {
        unsigned c = 0;
        for (int a : s.alts) c |= classes(a);
        return c;
      }
    }
    return kAll;
  }

  int add(SchemaNode n) {
    g_.nodes.push_back(std::move(n));
    return int(g_.nodes.size() - 1);
  }

  int union_of(const std::vector<int>& alts) {
    SchemaNode u;
    u.kind = Kind::kUnion;
    unsigned seen = 0;
    for (int a : alts) {
      const unsigned c = classes(a);
      if (c & seen) continue;  // overlaps an earlier alternative: dropped (a subset stays valid)
      seen |= c;
      u.alts.push_back(a);
    }
    if (u.alts.size() == 1) return u.alts[0];
    return add(std::move(u));
  }

  const json& resolve(const std::string& ref) {
    for (const char* prefix : {"#/$defs/", "#/definitions/"}) {
      const std::string p = prefix;
      if (ref.rfind(p, 0) != 0) continue;
      const json* defs = root_.contains(p.substr(2, p.size() - 3)) ? &root_[p.substr(2, p.size() - 3)] : nullptr;
      const std::string name = ref.substr(p.size());
      if (defs && defs->is_object() && defs->contains(name)) return (*defs)[name];
    }
    if (ref == "#") return root_;
    throw InputError(where_ + ": cannot resolve $ref '" + ref + "' (only local #/$defs/ and #/definitions/)");
  }

  int node(const json& s, int depth) {
    if (depth > 64) throw InputError(where_ + ": schema nested too deeply");
    if (s.is_boolean()) {
      if (!s.get<bool>()) throw InputError(where_ + ": schema 'false' allows no value");
      return 0;
    }
    if (!s.is_object()) throw InputError(where_ + ": a schema must be an object");
    if (auto r = s.find("$ref"); r != s.end() && r->is_string()) {
      const std::string ref = r->get<std::string>();
      if (auto it = refs_.find(ref); it != refs_.end()) return it->second;
      // Reserve the node first so a recursive schema refers back to it.
      const int slot = add({});
      refs_[ref] = slot;
      const int target = node(resolve(ref), depth + 1);
      g_.nodes[size_t(slot)] = g_.nodes[size_t(target)];
      return slot;
    }
    if (auto c = s.find("const"); c != s.end()) {
      SchemaNode n;
      n.kind = Kind::kEnum;
      n.enum_json.push_back(c->dump());
      return add(std::move(n));
    }
    if (auto e = s.find("enum"); e != s.end() && e->is_array() && !e->empty()) {
      SchemaNode n;
      n.kind = Kind::kEnum;
      for (const auto& v : *e) n.enum_json.push_back(v.dump());
      return add(std::move(n));
    }
    for (const char* key : {"anyOf", "oneOf"}) {
      if (auto a = s.find(key); a != s.end() && a->is_array() && !a->empty()) {
        std::vector<int> alts;
        for (const auto& sub : *a) alts.push_back(node(sub, depth + 1));
        return union_of(alts);
      }
    }
    if (auto a = s.find("allOf"); a != s.end() && a->is_array() && a->size() == 1) return node((*a)[0], depth + 1);
    auto t = s.find("type");
    if (t == s.end()) {
      // No type: infer it from the keywords present, else anything.
      if (s.contains("properties")) return typed(s, "object", depth);
      if (s.contains("items")) return typed(s, "array", depth);
      return 0;
    }
    if (t->is_string()) return typed(s, t->get<std::string>(), depth);
    if (t->is_array()) {
      std::vector<int> alts;
      for (const auto& name : *t)
        if (name.is_string()) alts.push_back(typed(s, name.get<std::string>(), depth));
      if (alts.empty()) return 0;
      return union_of(alts);
    }
    throw InputError(where_ + ": 'type' must be a string or an array of strings");
  }

  static int64_t count(const json& s, const char* key, int64_t dflt) {
    auto it = s.find(key);
    if (it == s.end() || !it->is_number_integer() || it->get<int64_t>() < 0) return dflt;
    return it->get<int64_t>();
  }

  int typed(const json& s, const std::string& type, int depth) {
    SchemaNode n;
    if (type == "string") {
      n.kind = Kind::kString;
      n.min_len = count(s, "minLength", 0);
      n.max_len = count(s, "maxLength", -1);
    } else if (type == "number") {
      n.kind = Kind::kNumber;
    } else if (type == "integer") {
      n.kind = Kind::kInteger;
    } else if (type == "boolean") {
      n.kind = Kind::kBoolean;
    } else if (type == "null") {
      n.kind = Kind::kNull;
    } else if (type == "array") {
      n.kind = Kind::kArray;
      n.items = s.contains("items") ? node(s["items"], depth + 1) : 0;
      n.min_items = count(s, "minItems", 0);
      n.max_items = count(s, "maxItems", -1);
    } else if (type == "object") {
      n.kind = Kind::kObject;
      std::vector<std::string> required;
      if (auto r = s.find("required"); r != s.end() && r->is_array())
        for (const auto& v : *r)
          if (v.is_string()) required.push_back(v.get<std::string>());
      if (auto p = s.find("properties"); p != s.end() && p->is_object()) {
        for (auto it = p->begin(); it != p->end() && n.props.size() < 63; ++it) {
          SchemaNode::Prop prop{it.key(), node(it.value(), depth + 1), false};
          for (const auto& r : required) prop.required = prop.required || r == prop.name;
          n.props.push_back(std::move(prop));
        }
      }
      // A required key that has no properties entry may hold anything.
      for (const auto& r : required) {
        bool known = false;
        for (const auto& p : n.props) known = known || p.name == r;
        if (!known && n.props.size() < 63) n.props.push_back({r, 0, true});
      }
      auto ap = s.find("additionalProperties");
      if (ap != s.end() && ap->is_object()) n.extra = node(*ap, depth + 1);
      else if ((ap != s.end() && ap->is_boolean() && ap->get<bool>()) || !s.contains("properties")) n.extra = 0;
    } else {
      throw InputError(where_ + ": unknown type '" + type + "'");
    }
    return add(std::move(n));
  }

  const json& root_;
  std::string where_;
  SchemaGraph g_;
  std::map<std::string, int> refs_;
};

}  // namespace

SchemaGraph SchemaGraph::compile(const json& schema, const std::string& where) {
  return Compiler(schema, where).run();
}

bool node_is_string(const SchemaNode& n) {
  if (n.kind == Kind::kString) return true;
  if (n.kind != Kind::kEnum || n.enum_json.empty()) return false;
  for (const auto& t : n.enum_json)
    if (t.empty() || t[0] != '"') return false;
  return true;
}

std::vector<std::string> string_properties(const json& parameters) {
  std::vector<std::string> out;
  try {
    const SchemaGraph g = SchemaGraph::compile(parameters, "parameters");
    for (const auto& p : g.nodes[size_t(g.root)].props)
      if (node_is_string(g.nodes[size_t(p.node)])) out.push_back(p.name);
  } catch (const std::exception&) {
  }
  return out;
}

}  // namespace ds4::tok
