#pragma once
// A tool's JSON schema compiled into the small graph the tool-call grammar walks
// (tool_grammar.h). What it enforces: type (one or several), enum / const, object
// properties + required (+ additionalProperties when given as true or a schema), array
// items + minItems / maxItems, string minLength / maxLength, anyOf / oneOf, local $ref.
// Keywords it does not enforce (pattern, format, minimum, ...) are ignored, so the grammar
// accepts a superset there; everything it enforces is a subset of what the schema allows.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace ds4::tok {

struct SchemaNode {
  enum class Kind { kAny, kString, kNumber, kInteger, kBoolean, kNull, kObject, kArray, kEnum, kUnion };
  Kind kind = Kind::kAny;
  std::vector<std::string> enum_json;  // kEnum: each allowed value as compact JSON text
  struct Prop {
    std::string name;
    int node = 0;
    bool required = false;
  };
  std::vector<Prop> props;             // kObject (at most 63: the grammar tracks them in a bitset)
  int extra = -1;                      // kObject: node of additional properties, -1 = none
  int items = -1;                      // kArray: node of the items
  int64_t min_items = 0, max_items = -1;
  int64_t min_len = 0, max_len = -1;   // kString, in code points
  std::vector<int> alts;               // kUnion: alternatives that start with distinct bytes
};

struct SchemaGraph {
  std::vector<SchemaNode> nodes;  // nodes[root] is the compiled schema
  int root = 0;
  // Compiles `schema` (a JSON schema object, or true/{} for anything). Throws
  // ds4::InputError naming `where` for a schema it cannot read (a $ref it cannot resolve,
  // false, a non-object where an object is required).
  static SchemaGraph compile(const nlohmann::json& schema, const std::string& where);
  int any_node() const { return 0; }  // nodes[0] is always kAny
};

// True when every value the node allows is a string (type "string", or an enum / const of
// strings only): those tool arguments are written as raw text in the family formats, and
// the output parser must keep them as text (never read "42" in one as a number).
bool node_is_string(const SchemaNode& n);
// The names of a tool's top-level properties that node_is_string() holds for, from its
// "parameters" schema; empty for a schema it cannot compile.
std::vector<std::string> string_properties(const nlohmann::json& parameters);

}  // namespace ds4::tok
