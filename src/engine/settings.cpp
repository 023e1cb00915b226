#include "engine/settings.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>

#include "core/error.h"
#include "models/model.h"

namespace ds4::engine {
namespace {

[[noreturn]] void bad(const std::string& where, const std::string& key, const std::string& value,
                      const std::string& why) {
  throw InputError(where + ": " + key + " = '" + value + "': " + why);
}

// from_chars, not stoll/stod: those skip leading blanks and read hex ("0x10" -> 16), so a
// typo could load as another value; the whole text must be one plain decimal number.
int64_t parse_int(const std::string& v, int64_t lo, int64_t hi, const std::string& where, const std::string& key) {
  int64_t x = 0;
  auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
  const bool out_of_range = ec == std::errc::result_out_of_range;  // past int64: outside [lo, hi] too
  if (!out_of_range && (ec != std::errc() || end != v.data() + v.size())) bad(where, key, v, "not an integer");
  if (out_of_range || x < lo || x > hi)
    bad(where, key, v, "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return x;
}

double parse_num(const std::string& v, double lo, double hi, const std::string& where, const std::string& key) {
  double x = 0;
  auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
  if (ec != std::errc() || end != v.data() + v.size() || !std::isfinite(x)) bad(where, key, v, "not a number");
  if (x < lo || x > hi) bad(where, key, v, "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return x;
}

bool parse_bool(const std::string& v, const std::string& where, const std::string& key) {
  if (v == "true" || v == "on" || v == "yes" || v == "1") return true;
  if (v == "false" || v == "off" || v == "no" || v == "0") return false;
  bad(where, key, v, "expected true or false");
}

std::string num(double x) {
  // Shortest text that reads back to the same double (0.95, not 0.94999999999999996).
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, x);
  return std::string(buf, r.ptr);
}

struct Key {
  const char* name;
  std::function<void(Settings&, const std::string&, const std::string&)> set;
  std::function<std::string(const Settings&)> get;
};

#define INT_KEY(NAME, FIELD, LO, HI)                                                                    \
  Key{NAME, [](Settings& s, const std::string& v, const std::string& w) { s.FIELD = decltype(s.FIELD)(parse_int(v, LO, HI, w, NAME)); }, \
      [](const Settings& s) { return std::to_string(s.FIELD); }}
#define STR_KEY(NAME, FIELD) \
  Key{NAME, [](Settings& s, const std::string& v, const std::string&) { s.FIELD = v; }, [](const Settings& s) { return s.FIELD; }}
#define BOOL_KEY(NAME, FIELD)                                                                            \
  Key{NAME, [](Settings& s, const std::string& v, const std::string& w) { s.FIELD = parse_bool(v, w, NAME); }, \
      [](const Settings& s) { return std::string(s.FIELD ? "true" : "false"); }}
#define OPT_NUM_KEY(NAME, FIELD, LO, HI)                                                          \
  Key{NAME,                                                                                       \
      [](Settings& s, const std::string& v, const std::string& w) {                               \
        if (v == "auto") s.FIELD.reset(); else s.FIELD = parse_num(v, LO, HI, w, NAME);           \
      },                                                                                          \
      [](const Settings& s) { return s.FIELD ? num(*s.FIELD) : std::string("auto"); }}

const std::vector<Key>& keys() {
  static const std::vector<Key> k = {
      STR_KEY("model", model),
      INT_KEY("power", power, 1, 100),
      Key{"prefill_chunk",
          [](Settings& s, const std::string& v, const std::string& w) {
            s.prefill_chunk = v == "auto" ? 0 : parse_int(v, 1, 1 << 20, w, "prefill_chunk");
          },
          [](const Settings& s) { return s.prefill_chunk ? std::to_string(s.prefill_chunk) : std::string("auto"); }},
      Key{"context_size",
          [](Settings& s, const std::string& v, const std::string& w) {
            s.context_size = v == "auto" ? 0 : parse_int(v, 16, int64_t(1) << 24, w, "context_size");
          },
          [](const Settings& s) { return s.context_size ? std::to_string(s.context_size) : std::string("auto"); }},
      Key{"backend",
          [](Settings& s, const std::string& v, const std::string& w) {
            if (v != "auto" && v != "cpu" && v != "cuda") bad(w, "backend", v, "expected auto, cpu or cuda");
            s.backend = v;
          },
          [](const Settings& s) { return s.backend; }},
      Key{"thinking",
          [](Settings& s, const std::string& v, const std::string& w) {
            static const char* ok[] = {"off", "on", "low", "medium", "high", "max"};
            if (std::find(std::begin(ok), std::end(ok), v) == std::end(ok))
              bad(w, "thinking", v, "expected off, on, low, medium, high or max");
            s.thinking = v;
          },
          [](const Settings& s) { return s.thinking; }},
      BOOL_KEY("plain_chat", plain_chat),
      INT_KEY("threads", threads, 0, 4096),
      OPT_NUM_KEY("sampler.temperature", temperature, 0.0, 100.0),
      OPT_NUM_KEY("sampler.top_p", top_p, 1e-9, 1.0),
      Key{"sampler.top_k",
          [](Settings& s, const std::string& v, const std::string& w) {
            if (v == "auto")
              s.top_k.reset();
            else
              s.top_k = int(parse_int(v, 0, 1 << 20, w, "sampler.top_k"));
          },
          [](const Settings& s) { return s.top_k ? std::to_string(*s.top_k) : std::string("auto"); }},
      OPT_NUM_KEY("sampler.min_p", min_p, 0.0, 1.0),
      Key{"sampler.seed",
          [](Settings& s, const std::string& v, const std::string& w) {
            if (v == "auto") {
              s.seed.reset();
              return;
            }
            // from_chars: stoull read " -1" as 2^64-1 (it skips blanks, then wraps the minus).
            uint64_t x = 0;
            auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
            if (ec != std::errc() || end != v.data() + v.size())
              bad(w, "sampler.seed", v, "not a non-negative integer");
            s.seed = x;
          },
          [](const Settings& s) { return s.seed ? std::to_string(*s.seed) : std::string("auto"); }},
      BOOL_KEY("sampler.candidates", sample_candidates),
      INT_KEY("sampler.candidates_k", sample_candidates_k, 1, 1024),
      Key{"speculative.enabled",
          [](Settings& s, const std::string& v, const std::string& w) {
            if (v == "auto") return s.speculative.reset();
            if (v != "true" && v != "false" && v != "on" && v != "off" && v != "yes" && v != "no" && v != "1" && v != "0")
              bad(w, "speculative.enabled", v, "expected auto, true or false");
            s.speculative = parse_bool(v, w, "speculative.enabled");
          },
          [](const Settings& s) { return s.speculative ? std::string(*s.speculative ? "true" : "false") : "auto"; }},
      INT_KEY("speculative.depth", depth, 1, kMaxSpeculativeDepth),
      OPT_NUM_KEY("speculative.dspark_confidence", dspark_confidence, 0.0, 1.0),
      Key{"speculative.sampling",
          [](Settings& s, const std::string& v, const std::string& w) {
            static const char* ok[] = {"exact", "opportunistic", "target_only"};
            if (std::find(std::begin(ok), std::end(ok), v) == std::end(ok))
              bad(w, "speculative.sampling", v, "expected exact, opportunistic or target_only");
            s.spec_sampling = v;
          },
          [](const Settings& s) { return s.spec_sampling; }},
      BOOL_KEY("batching.enabled", batching),
      INT_KEY("batching.step_tokens", batching_step_tokens, 0, int64_t(1) << 24),
      INT_KEY("batching.state_memory_mib", batching_state_memory_mib, 0, int64_t(1) << 30),
      Key{"batching.preempt",
          [](Settings& s, const std::string& v, const std::string& w) {
            if (v != "auto" && v != "swap" && v != "recompute")
              bad(w, "batching.preempt", v, "expected auto, swap or recompute");
            s.batching_preempt = v;
          },
          [](const Settings& s) { return s.batching_preempt; }},
      INT_KEY("batching.swap_mib", batching_swap_mib, 0, int64_t(1) << 30),
      INT_KEY("cache.mib", cache_mib, 0, int64_t(1) << 24),
      Key{"cache.snapshot_every",
          [](Settings& s, const std::string& v, const std::string& w) {
            s.cache_snapshot_every = v == "auto" ? 0 : v == "off" ? -1 : parse_int(v, 1, int64_t(1) << 24, w, "cache.snapshot_every");
          },
          [](const Settings& s) {
            return s.cache_snapshot_every > 0 ? std::to_string(s.cache_snapshot_every)
                                              : std::string(s.cache_snapshot_every < 0 ? "off" : "auto");
          }},
      STR_KEY("checkpoint.dir", checkpoint_dir),
      // 0 would keep no checkpoint while still writing each one (then evicting it): not a budget.
      INT_KEY("checkpoint.budget_bytes", checkpoint_budget_bytes, 1, int64_t(1) << 50),
      STR_KEY("server.host", host),
      INT_KEY("server.port", port, 0, 65535),
      STR_KEY("server.api_key", api_key),
      STR_KEY("server.cors_origin", cors_origin),
      INT_KEY("server.max_body_bytes", max_body_bytes, 1024, int64_t(1) << 32),
      INT_KEY("server.max_tokens_limit", max_tokens_limit, 1, int64_t(1) << 24),
      INT_KEY("server.default_max_tokens", default_max_tokens, 1, int64_t(1) << 24),
      INT_KEY("server.http_threads", http_threads, 2, 4096),
      INT_KEY("server.header_timeout_s", header_timeout_s, 1, 3600),
      INT_KEY("server.body_timeout_s", body_timeout_s, 1, 3600),
      INT_KEY("server.max_connections_per_client", max_connections_per_client, 0, 1 << 20),
      STR_KEY("server.web_root", web_root),
      STR_KEY("server.js_root", js_root),
  };
  return k;
}

const Key* find_key(const std::string& name) {
  const Key* found = nullptr;
  int matches = 0;
  for (const auto& k : keys()) {
    std::string n = k.name;
    if (n == name) return &k;
    auto dot = n.rfind('.');
    if (dot != std::string::npos && n.substr(dot + 1) == name) found = &k, matches++;
  }
  return matches == 1 ? found : nullptr;
}

// `seen`: every key met so far (full dotted name -> line). yaml-cpp keeps duplicate keys and
// the last one silently won, so "power: 50 ... power: 60" (or a section given twice) is an error.
void walk(Settings& s, const YAML::Node& node, const std::string& prefix, const std::string& file,
          std::map<std::string, int>& seen) {
  for (auto it = node.begin(); it != node.end(); ++it) {
    const int line = it->first.Mark().line + 1;
    const std::string where = file + ":" + std::to_string(line);
    // A complex key ("? [a, b]") is no setting name; as<std::string>() would throw yaml-cpp's
    // "bad conversion" without the file.
    if (!it->first.IsScalar()) throw InputError(where + ": a key must be a plain name");
    const std::string key = prefix + it->first.Scalar();
    if (auto [first, fresh] = seen.emplace(key, line); !fresh)
      throw InputError(where + ": duplicate key '" + key + "' (first at line " + std::to_string(first->second) + ")");
    if (it->second.IsMap()) {
      walk(s, it->second, key + ".", file, seen);
      continue;
    }
    const Key* k = nullptr;
    for (const auto& kk : keys())
      if (key == kk.name) k = &kk;
    if (!k) throw InputError(where + ": unknown key '" + key + "'");
    if (!it->second.IsScalar()) bad(where, key, "", "expected a single value");
    k->set(s, it->second.Scalar(), where);
  }
}

}  // namespace

std::vector<std::string> setting_keys() {
  std::vector<std::string> out;
  for (const auto& k : keys()) out.push_back(k.name);
  return out;
}

void set_setting(Settings& s, const std::string& key, const std::string& value, const std::string& where) {
  const Key* k = find_key(key);
  if (!k) throw InputError(where + ": unknown setting '" + key + "'");
  k->set(s, value, where);
}

void load_settings_yaml(Settings& s, const std::string& text, const std::string& name) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw InputError(name + ":" + std::to_string(e.mark.line + 1) + ": YAML error: " + e.msg);
  }
  if (root.IsNull()) return;
  if (!root.IsMap()) throw InputError(name + ": expected a mapping of settings");
  std::map<std::string, int> seen;
  walk(s, root, "", name, seen);
}

void load_settings_file(Settings& s, const std::string& path) {
  // A directory opens as an ifstream on Linux and reads as nothing: an empty config, silently.
  if (std::filesystem::is_directory(path)) throw InputError("config file " + path + " is a directory");
  std::ifstream f(path);
  if (!f) throw InputError("cannot read config file " + path);
  std::stringstream ss;
  ss << f.rdbuf();
  if (f.bad()) throw InputError("cannot read config file " + path);
  load_settings_yaml(s, ss.str(), path);
}

std::vector<std::string> apply_cli(Settings& s, const std::vector<std::string>& args,
                                   const std::vector<std::string>& own_flags) {
  // Both spellings: the loop below skips "--config=FILE" as a setting, so it must load here.
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--config" && i + 1 < args.size()) load_settings_file(s, args[i + 1]);
    if (args[i].rfind("--config=", 0) == 0) load_settings_file(s, args[i].substr(9));
  }
  std::vector<std::string> rest;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (std::find(own_flags.begin(), own_flags.end(), a) != own_flags.end()) {
      rest.push_back(a);
      continue;
    }
    if (a.rfind("--", 0) != 0) throw InputError("unexpected argument '" + a + "'");
    std::string key = a.substr(2), value;
    auto eq = key.find('=');
    if (eq != std::string::npos) {
      value = key.substr(eq + 1);
      key = key.substr(0, eq);
    } else {
      if (i + 1 >= args.size()) throw InputError(a + ": missing value");
      value = args[++i];
    }
    if (key == "config") continue;
    for (auto& c : key)
      if (c == '-') c = '_';
    set_setting(s, key, value, "--" + key);
  }
  return rest;
}

std::string settings_yaml(const Settings& s, bool redact_secrets) {
  std::string out, section;
  for (const auto& k : keys()) {
    std::string name = k.name, leaf = name, sec;
    auto dot = name.find('.');
    if (dot != std::string::npos) sec = name.substr(0, dot), leaf = name.substr(dot + 1);
    if (sec != section) {
      if (!sec.empty()) out += sec + ":\n";
      section = sec;
    }
    YAML::Emitter e;
    std::string v = k.get(s);
    // The receipt is shown by /health without auth: never print the key itself.
    if (redact_secrets && name == "server.api_key" && !v.empty()) v = "<set>";
    e << v;
    out += (sec.empty() ? "" : "  ") + leaf + ": " + std::string(e.c_str()) + "\n";
  }
  return out;
}

}  // namespace ds4::engine
