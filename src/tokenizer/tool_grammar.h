#pragma once
// The language a model may write under a tool choice, as a recognizer over "units": the
// bytes of normal tokens (0..255), control tokens (kControlBase + id: the family's markers
// such as <tool_call>, which must come as that one token, never spelled out in bytes) and
// the turn end (kStopUnit: any stop token). The engine (engine/grammar_constraint.h) masks
// each step's logits to the tokens whose units keep a State alive, so the output is always
// a prefix of the language and every finished turn is valid.
//
//   required / function  [reasoning until </think>] then the family's native tool-call block
//                        (Qwen <tool_call><function=..><parameter=..>, GLM <tool_call>NAME
//                        <arg_key>..<arg_value>.., DeepSeek DSML invoke/parameter), one call
//                        of the named function or one or more (parallel) of any tool, each
//                        argument written the family's way: strings as raw text, everything
//                        else as JSON valid against the tool's schema (json_schema.h); then
//                        the turn ends.
//   none                 [reasoning] then text that never contains the tool-call opening.
// The grammar is deterministic: every unit moves one State to at most one next State (JSON
// unions keep only alternatives with distinct first bytes), so a State is a small stack of
// frames that is cheap to copy per token.
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tokenizer/chat_template.h"
#include "tokenizer/json_schema.h"

namespace ds4::tok {

struct ToolChoice {
  enum class Mode { kAuto, kNone, kRequired, kFunction };
  Mode mode = Mode::kAuto;
  std::string function;  // kFunction: the one function to call
  bool parallel = true;  // kRequired: more than one call allowed (families that can)
  // Whether decoding must be constrained (auto is left to the model).
  bool constrains() const { return mode != Mode::kAuto; }
};
const char* tool_choice_name(ToolChoice::Mode m);

constexpr int32_t kStopUnit = -1;
constexpr int32_t kControlBase = 256;

// The vocabulary's control tokens as the grammar needs them.
struct GrammarVocab {
  std::vector<std::pair<std::string, int32_t>> controls;  // added tokens: text, id
  std::vector<int32_t> stops;                              // turn-end token ids
};

class ToolGrammar {
 public:
  // tools: the conversation's tool definitions (OpenAI {"type":"function","function":{..}}
  // or a bare {"name","parameters"}). Throws ds4::InputError naming the problem: a choice
  // naming a function that is not among the tools, a call choice with no tools, a schema it
  // cannot read, a format marker the vocabulary lacks.
  static std::shared_ptr<const ToolGrammar> build(Family family, const std::vector<std::string>& tools,
                                                  const ToolChoice& choice, bool starts_in_reasoning,
                                                  const GrammarVocab& vocab);

  struct Frame {
    uint8_t kind = 0, st = 0, need = 0, lead = 0;  // need/lead: UTF-8 continuation bytes due
    int32_t id = 0;                                // literal / set / text spec / schema node / function
    int32_t lo = 0, hi = 0, pos = 0;
    int32_t count = 0, aux = 0;
    uint64_t bits = 0;
    uint8_t tail_len = 0;
    char tail[47] = {};  // raw text: its last bytes, for terminator / forbidden-text checks
  };
  static constexpr int kMaxDepth = 32;
  // How deep a parameter's JSON value may nest arrays / objects: its frame sits on the root,
  // the call and the literal after the value (depth 4), and value_step opens no container at
  // depth kMaxDepth - 4 or more. A schema that needs more levels cannot be completed.
  static constexpr int kMaxJsonNesting = kMaxDepth - 4 - 4;

  class State {
   public:
    // Feeds one unit; false (State unchanged in meaning: do not use it further) when the
    // unit leaves the language.
    bool feed(int32_t unit);
    bool feed_bytes(std::string_view bytes);
    // Everything was matched, the turn end included: no unit is accepted any more.
    bool done() const { return depth_ == 0; }
    // Copies only the live frames (the per-token check copies a State for every candidate).
    void assign(const State& o);
    // Free text where a "plain" token (plain_token()) is always allowed and leaves the State
    // as it was in kind: raw text with no length limit and no marker under way (kRawText),
    // or inside a JSON string without limits (kJsonString). The token masks skip the per-token
    // check for those: most of a large vocabulary, in the longest stretches of a turn.
    enum class Plain { kNone, kRawText, kJsonString };
    Plain plain() const;

   private:
    friend class ToolGrammar;
    enum class Step { kTake, kDone, kPass, kReject, kRetry };
    Step step(Frame& f, int32_t u);
    bool resume();  // the top frame completed with result_: let the frame below go on
    bool push(const Frame& f);
    Frame make(uint8_t kind, int32_t id) const;
    Step text_step(Frame& f, int32_t u);
    Step text_byte(Frame& f, uint8_t b, bool check_utf8);
    Step value_step(Frame& f, int32_t u);
    Step string_step(Frame& f, int32_t u);
    Step number_step(Frame& f, int32_t u);
    Step object_step(Frame& f, int32_t u);
    Step array_step(Frame& f, int32_t u);
    Step choice_step(Frame& f, int32_t u);
    enum class Resume { kGoOn, kComplete, kFail };
    Resume call_resume(Frame& f);
    Resume root_resume(Frame& f);
    Resume object_resume(Frame& f);
    bool push_param_choice(const Frame& call);
    bool can_start(int node, int32_t u) const;

    const ToolGrammar* g_ = nullptr;
    std::array<Frame, kMaxDepth> frames_;
    int depth_ = 0;
    int32_t result_ = 0;  // what the frame that just completed chose (choice index, stop)
  };
  // A State points into its grammar: the grammar must outlive it.
  State start() const;
  // Whether a token's bytes are plain for State::plain(): complete valid UTF-8 without '<'
  // (every marker starts with it) nor C0 controls but tab / newline / return; for a JSON
  // string also without '"', '\\' and any C0 control.
  static bool plain_token(std::string_view bytes, State::Plain kind);

  // ---- the compiled tables (read by State) ----
  struct LitSet {
    std::vector<std::vector<int32_t>> cands;  // sorted by units
    std::vector<int> orig;                    // the caller's index of each sorted candidate
  };
  struct TextSpec {
    std::string term;                // ends the text (its last bytes); empty: only a stop ends it
    std::vector<std::string> avoid;  // texts it may never contain (the parser would cut there)
    int64_t min_len = 0, max_len = -1;
    bool stop_ends = false;          // a stop token ends the text (and the turn)
    // The parser drops one newline before the terminator (Qwen writes "\n</parameter>"):
    // it does not count toward min_len / max_len.
    bool strip_nl = false;
  };
  struct ParamFmt {
    enum class Form { kRaw, kRawEnum, kJson } form = Form::kJson;
    int node = 0;         // kJson: schema node
    int text = -1;        // kRaw: text spec
    int set = -1;         // kRawEnum: the values, each followed by the terminator and after-text
    int after = -1;       // literal after the value (-1: none)
  };
  struct FnFmt {
    std::string name;
    int param_set = -1;   // candidates: one opening per parameter, then the call's close
    std::vector<ParamFmt> params;
    uint64_t required = 0;
  };

 private:
  friend class GrammarBuilder;
  std::vector<std::vector<int32_t>> lits_;
  std::vector<LitSet> sets_;
  std::vector<TextSpec> texts_;
  std::vector<SchemaNode> nodes_;   // all tools' schemas; 0 any, 1 any object, 2 any array
  std::vector<int> enum_set_;       // per node: its LitSet when kEnum, else -1
  std::vector<int> key_set_;        // per node: kObject with properties: its keys (name + '"')
  int lit_true_ = -1, lit_false_ = -1, lit_null_ = -1;
  std::vector<FnFmt> fns_;
  std::unordered_map<int32_t, std::string> control_text_;  // unit -> the control token's text
  ToolChoice::Mode mode_ = ToolChoice::Mode::kAuto;
  int reasoning_text_ = -1;  // text spec of the reasoning block (-1: the turn starts in content)
  int content_text_ = -1;    // mode none: the answer text
  int open_first_ = -1;      // literal that opens the first call (up to the function name)
  int name_set_ = -1;        // the callable functions' names (+ what follows a name)
  int after_more_ = -1, after_end_ = -1;  // after a call: end or open another / end only
  int max_calls_ = 1;
};

}  // namespace ds4::tok
