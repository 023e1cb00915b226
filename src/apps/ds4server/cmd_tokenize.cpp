// `ds4server tokenize` / `detokenize`: the tokenizer from the command line, plus a JSONL
// batch mode (one request per stdin line) that the oracle tests drive in one process.
#include <cstdio>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>

#include "apps/ds4server/commands.h"
#include "core/error.h"
#include "tokenizer/tokenizer.h"

namespace ds4::cli {

namespace {

struct TokOpts {
  std::string path;
  bool json = false, jsonl = false, special = false;
  std::vector<std::string> rest;
};

TokOpts parse_tok_opts(const Args& args, const char* cmd) {
  TokOpts o;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--tokenizer") {
      if (i + 1 >= args.size()) throw InputError("--tokenizer needs a path");
      o.path = args[++i];
    } else if (a == "--json") {
      o.json = true;
    } else if (a == "--jsonl") {
      o.jsonl = true;
    } else if (a == "--special") {
      o.special = true;
    } else {
      o.rest.push_back(a);
    }
  }
  if (o.path.empty())
    throw InputError(std::string("usage: ds4server ") + cmd + " --tokenizer PATH [--json] [--special] ...");
  return o;
}

std::string from_hex(const std::string& h) {
  if (h.size() % 2) throw InputError("hex field has odd length");
  std::string out;
  for (size_t i = 0; i < h.size(); i += 2) out += static_cast<char>(std::stoi(h.substr(i, 2), nullptr, 16));
  return out;
}

}  // namespace

// {"text": s} or {"hex": h} (raw bytes, for invalid UTF-8), optional "special": bool;
// or {"ids": [...]} to decode (answer has "text" and the StreamDecoder's "streamed").
nlohmann::ordered_json tokenizer_request(const tok::Tokenizer& tk, const nlohmann::ordered_json& req, bool special) {
  nlohmann::ordered_json res;
  if (req.contains("ids")) {
    auto ids = req["ids"].get<std::vector<tok::TokenId>>();
    res["text"] = tk.decode(ids, req.value("skip_special", false));
    tok::StreamDecoder sd(tk, req.value("skip_special", false));
    std::string streamed;
    for (auto id : ids) streamed += sd.push(id);
    streamed += sd.finish();
    res["streamed"] = streamed;
  } else {
    std::string text = req.contains("hex") ? from_hex(req["hex"].get<std::string>()) : req.at("text").get<std::string>();
    res["ids"] = tk.encode(text, req.value("special", special));
  }
  return res;
}

namespace {

// One JSON request per stdin line, one JSON answer per stdout line.
int run_jsonl(const tok::Tokenizer& tk, bool special) {
  using nlohmann::json;
  std::string line;
  while (std::getline(std::cin, line)) {
    if (line.empty()) continue;
    auto res = tokenizer_request(tk, nlohmann::ordered_json::parse(line), special);
    std::string out = res.dump(-1, ' ', false, json::error_handler_t::replace);
    std::fwrite(out.data(), 1, out.size(), stdout);
    std::fputc('\n', stdout);
  }
  return 0;
}

}  // namespace

int cmd_tokenize(const Args& args) {
  TokOpts o = parse_tok_opts(args, "tokenize");
  auto tk = tok::Tokenizer::load(o.path);
  if (o.jsonl) return run_jsonl(tk, o.special);
  if (o.rest.size() != 1) throw InputError("tokenize takes one TEXT argument (or - for stdin)");
  std::string text = o.rest[0];
  if (text == "-") text.assign(std::istreambuf_iterator<char>(std::cin), {});
  auto ids = tk.encode(text, o.special);
  if (o.json) {
    nlohmann::json j;
    j["ids"] = ids;
    std::vector<std::string> pieces;
    for (auto id : ids) pieces.push_back(tk.token_to_str(id));
    j["tokens"] = pieces;
    std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  } else {
    for (size_t i = 0; i < ids.size(); ++i) std::printf(i ? " %d" : "%d", ids[i]);
    std::printf("\n");
  }
  return 0;
}

int cmd_detokenize(const Args& args) {
  TokOpts o = parse_tok_opts(args, "detokenize");
  auto tk = tok::Tokenizer::load(o.path);
  if (o.jsonl) return run_jsonl(tk, o.special);
  std::vector<tok::TokenId> ids;
  for (const auto& a : o.rest) {
    size_t used = 0;
    long v = 0;
    try {
      v = std::stol(a, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != a.size()) throw InputError("detokenize: not a token id: '" + a + "'");
    ids.push_back(static_cast<tok::TokenId>(v));
  }
  std::string text = tk.decode(ids);
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::printf("\n");
  return 0;
}

}  // namespace ds4::cli
