#include "server/api_common.h"

#include <chrono>
#include <cstdio>
#include <limits>
#include <random>

#include "core/capacity_error.h"
#include "core/error.h"
#include "core/json_depth.h"
#include "engine/rng.h"
#include "server/client_watch.h"
#include "server/conn_guard.h"
#include "server/turn_metrics.h"

namespace ds4::server {

void fail(const std::string& message, const std::string& param, int status) {
  throw ApiError{status, status == 401 ? "authentication_error" : "invalid_request_error", message, param};
}

ErrorShape error_shape(const std::string& path) {
  return path.rfind("/v1/messages", 0) == 0 ? ErrorShape::kAnthropic : ErrorShape::kOpenAI;
}

std::string error_body(ErrorShape shape, const ApiError& e, const std::string& code) {
  if (shape == ErrorShape::kAnthropic) {
    std::string type = e.type;
    if (e.status == 404) type = "not_found_error";
    if (e.status == 413) type = "request_too_large";
    // Anthropic's api_error is "an unexpected error internal to" the server; 501 and 505 say
    // the request used a method, HTTP version or transfer coding this server does not
    // implement, a fault in the request's format: invalid_request_error, the type Anthropic
    // gives "an issue with the format or content of your request" (and other 4xx).
    const bool client_protocol_error = e.status == 501 || e.status == 505;
    if (e.status >= 500 && !client_protocol_error) type = e.status == 503 ? "overloaded_error" : "api_error";
    return dump({{"type", "error"}, {"error", {{"type", type}, {"message", e.message}}}});
  }
  json err = {{"message", e.message}, {"type", e.type}, {"param", e.param.empty() ? json() : json(e.param)},
              {"code", code.empty() ? json() : json(code)}};
  if (e.status == 401 && code.empty()) err["code"] = "invalid_api_key";
  return dump({{"error", err}});
}

std::string error_body(const std::string& path, const ApiError& e) { return error_body(error_shape(path), e); }

json parse_body(const httplib::Request& req) {
  ConnGuard::handler_started();  // the body is in: no body deadline while the handler runs
  if (json_nests_deeper(req.body))
    fail("request body nests arrays / objects deeper than " + std::to_string(kMaxJsonDepth) + " levels");
  json j = json::parse(req.body, nullptr, false);  // rejects invalid UTF-8 too
  if (j.is_discarded()) fail("request body is not valid JSON (or not valid UTF-8)");
  if (!j.is_object()) fail("request body must be a JSON object");
  // This server serves one model under any name (the SDKs need one; the page sends "default"),
  // but a name that is not a string is a malformed request on every API.
  if (auto m = j.find("model"); m != j.end() && !m->is_null() && !m->is_string())
    fail("'model' must be a string", "model");
  return j;
}

namespace {
const json* field(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return nullptr;
  return &*it;
}
std::string path_of(const char* key, const std::string& where) { return where.empty() ? key : where + "." + key; }
}  // namespace

std::optional<std::string> get_string(const json& j, const char* key, const std::string& where) {
  auto f = field(j, key);
  if (!f) return std::nullopt;
  if (!f->is_string()) fail("'" + path_of(key, where) + "' must be a string", path_of(key, where));
  return f->get<std::string>();
}

std::optional<double> get_number(const json& j, const char* key, const std::string& where) {
  auto f = field(j, key);
  if (!f) return std::nullopt;
  if (!f->is_number()) fail("'" + path_of(key, where) + "' must be a number", path_of(key, where));
  return f->get<double>();
}

std::optional<int64_t> get_int(const json& j, const char* key, const std::string& where) {
  auto f = field(j, key);
  if (!f) return std::nullopt;
  if (!f->is_number_integer()) fail("'" + path_of(key, where) + "' must be an integer", path_of(key, where));
  // An integer above INT64_MAX parses as unsigned: read as int64 it wrapped to a negative number
  // (max_tokens 2^64 - 1 was told "must be >= 1").
  if (f->is_number_unsigned() && f->get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max()))
    fail("'" + path_of(key, where) + "' is out of range (at most " +
             std::to_string(std::numeric_limits<int64_t>::max()) + ")",
         path_of(key, where));
  return f->get<int64_t>();
}

std::optional<bool> get_bool(const json& j, const char* key, const std::string& where) {
  auto f = field(j, key);
  if (!f) return std::nullopt;
  if (!f->is_boolean()) fail("'" + path_of(key, where) + "' must be a boolean", path_of(key, where));
  return f->get<bool>();
}

const json* get_array(const json& j, const char* key, const std::string& where) {
  auto f = field(j, key);
  if (f && !f->is_array()) fail("'" + path_of(key, where) + "' must be an array", path_of(key, where));
  return f;
}

const json* get_object(const json& j, const char* key, const std::string& where) {
  auto f = field(j, key);
  if (f && !f->is_object()) fail("'" + path_of(key, where) + "' must be an object", path_of(key, where));
  return f;
}

std::string function_tool(const json& t, size_t i, const char* schema_key) {
  const std::string where = "tools[" + std::to_string(i) + "]";
  if (!t.is_object()) fail("'" + where + "' must be an object", where);
  auto field = [&](const char* key) { return where + "." + key; };
  auto name = t.find("name");
  if (name == t.end() || !name->is_string() || name->get_ref<const std::string&>().empty())
    fail("'" + field("name") + "' must be a non-empty string", field("name"));
  json fn = {{"name", *name}, {"description", ""}, {"parameters", json::object()}};
  if (auto d = t.find("description"); d != t.end() && !d->is_null()) {
    if (!d->is_string()) fail("'" + field("description") + "' must be a string", field("description"));
    fn["description"] = *d;
  }
  if (auto p = t.find(schema_key); p != t.end() && !p->is_null()) {
    if (!p->is_object()) fail("'" + field(schema_key) + "' must be an object (a JSON schema)", field(schema_key));
    fn["parameters"] = *p;
  }
  return dump({{"type", "function"}, {"function", fn}});
}

engine::SamplerParams resolve_sampler(const Context& c, const json& body, double max_temperature) {
  auto p = engine::default_sampler_params(c.engine.sampler_kind());
  const auto& s = c.settings;
  if (s.temperature) p.temperature = *s.temperature;
  if (s.top_p) p.top_p = *s.top_p;
  if (s.top_k) p.top_k = *s.top_k;
  if (s.min_p) p.min_p = *s.min_p;
  // No seed in the settings or the request: a fresh one per request (reported in usage.seed),
  // so "regenerate" draws anew and any answer can still be reproduced.
  p.seed = s.seed ? *s.seed : engine::fresh_seed();
  if (auto v = get_number(body, "temperature")) {
    // The protocol's documented range (OpenAI 0..2, Anthropic 0..1): the engine only refuses a
    // negative one, and a client sending 5 is told so rather than sampled at 5.
    if (*v < 0 || *v > max_temperature) {
      char hi[16];
      std::snprintf(hi, sizeof hi, "%g", max_temperature);
      fail(std::string("'temperature' must be between 0 and ") + hi, "temperature");
    }
    p.temperature = *v;
  }
  if (auto v = get_number(body, "top_p")) p.top_p = *v;
  if (auto v = get_int(body, "top_k")) p.top_k = int(std::clamp<int64_t>(*v, -1, 1 << 30));
  if (auto v = get_number(body, "min_p")) p.min_p = *v;
  if (auto f = body.find("seed"); f != body.end() && f->is_number_unsigned()) {
    p.seed = f->get<uint64_t>();  // the whole 64-bit range is a seed (get_int stops at INT64_MAX)
  } else if (auto v = get_int(body, "seed")) {
    if (*v < 0) fail("'seed' must be >= 0", "seed");
    p.seed = uint64_t(*v);
  }
  if (p.top_k < 0) p.top_k = 0;  // -1 is the common "off" spelling
  // The settings' values were checked at startup, so a problem here is the request's field.
  if (const auto problem = engine::sampler_problem(c.engine.sampler_kind(), p)) fail(problem->message, problem->field);
  return p;
}

tok::Thinking thinking_from_settings(const engine::Settings& s) {
  return tok::thinking_from_name(s.thinking);
}

int64_t resolve_max_tokens(const Context& c, std::optional<int64_t> requested) {
  if (!requested) return c.settings.default_max_tokens;
  if (*requested < 1) fail("max_tokens must be >= 1", "max_tokens");
  if (*requested > c.settings.max_tokens_limit)
    fail("max_tokens " + std::to_string(*requested) + " exceeds this server's limit of " +
             std::to_string(c.settings.max_tokens_limit), "max_tokens");
  return *requested;
}

std::vector<std::string> stop_list(const json& body, const char* key) {
  std::vector<std::string> out;
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return out;
  if (it->is_string()) return {it->get<std::string>()};
  if (!it->is_array()) fail(std::string("'") + key + "' must be a string or an array of strings", key);
  for (const auto& s : *it) {
    if (!s.is_string()) fail(std::string("'") + key + "' must contain strings", key);
    out.push_back(s.get<std::string>());
  }
  if (out.size() > 16) fail(std::string("at most 16 '") + key + "' entries", key);
  return out;
}

json usage_extras(const engine::Usage& u) {
  const double rate = u.spec_drafted ? double(u.spec_accepted) / double(u.spec_drafted) : 0.0;
  json j = {{"seed", u.seed},
          {"timings", {{"ttft_s", u.ttft_s}, {"prefill_s", u.prefill_s}, {"decode_s", u.decode_s}}},
          {"speculative",
           {{"mode", u.spec_mode}, {"depth", u.spec_depth}, {"off_reason", u.spec_off_reason},
            {"drafted", u.spec_drafted}, {"accepted", u.spec_accepted},
            {"bonus", u.spec_bonus}, {"corrections", u.spec_corrections}, {"acceptance", rate},
            {"prefix_commits", u.spec_prefix_commits}, {"dspark_confidence", u.spec_dspark_confidence},
            {"repairs", u.spec_repairs},
            {"full_replays", u.spec_full_replays}, {"draft_s", u.spec_draft_s},
            {"verify_s", u.spec_verify_s}, {"commit_s", u.spec_commit_s}}},
          // Decode draws from the model's top candidates vs from the full row after all.
          {"sampling", {{"from_candidates", u.sampled_from_candidates}, {"full_fallback", u.sampled_full_fallback}}},
          // Steps decoded under a tool_choice constraint (0: the turn was not constrained).
          {"constrained_steps", u.constrained_steps}};
  if (const auto& c = u.gpu_canary)
    j["gpu_canary"] = {{"samples", c->samples}, {"p50_ms", c->p50_ms}, {"p95_ms", c->p95_ms},
                       {"p99_ms", c->p99_ms},   {"max_ms", c->max_ms}, {"stalls", c->stalls}};
  return j;
}

tok::Message make_message(std::string role, std::string content) {
  tok::Message m;
  m.role = std::move(role);
  m.content = std::move(content);
  return m;
}

std::string new_id(const std::string& prefix) {
  static thread_local std::mt19937_64 rng(std::random_device{}());
  static const char* hex = "0123456789abcdef";
  std::string s = prefix;
  for (int i = 0; i < 24; ++i) s.push_back(hex[rng() & 15]);
  return s;
}

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

void start_sse(const httplib::Request& q, httplib::Response& r, httplib::ContentProviderWithoutLength provider) {
  if (q.version != "HTTP/1.0") return r.set_chunked_content_provider("text/event-stream", std::move(provider));
  mark_connection_close(q);
  r.set_content_provider("text/event-stream", [provider = std::move(provider)](size_t off, httplib::DataSink& sink) {
    provider(off, sink);
    return false;  // ends httplib's keep-alive loop (a 1.0 client may have asked for keep-alive): the close ends the body
  });
}

bool sse_write(httplib::DataSink& sink, const std::string& event, const std::string& data) {
  std::string s;
  if (!event.empty()) s += "event: " + event + "\n";
  s += "data: " + data + "\n\n";
  return sink.write(s.data(), s.size());
}

bool pump(engine::RequestHandle& h, httplib::DataSink& sink, const std::string& keepalive,
          const std::function<bool(const engine::GenEvent&)>& on_event) {
  using K = engine::GenEvent::Kind;
  for (;;) {
    auto ev = h.next(std::chrono::milliseconds(1000));
    bool ok = true;
    if (!ev || ev->kind == K::kProgress) {
      ok = sink.is_writable() && sink.write(keepalive.data(), keepalive.size());
    } else {
      if (ev->kind == K::kDone) turn_metrics().observe(ev->usage);
      ok = on_event(*ev);
      if (ev->kind == K::kDone || ev->kind == K::kError) return ok;
    }
    if (!ok) {
      // Client gone: stop generating; drain until the engine confirms so no state leaks.
      h.cancel();
      while (auto e = h.next(std::chrono::milliseconds(30000)))
        if (e->kind == K::kDone || e->kind == K::kError) break;
      return false;
    }
  }
}

void wait_events(engine::RequestHandle& h, const httplib::Request& q,
                 const std::function<void(const engine::GenEvent&)>& on_event) {
  using K = engine::GenEvent::Kind;
  ClientWatch watch(q);
  for (;;) {
    // Events come every token, so the client is looked at by the clock, not on timeouts.
    if (!h.cancelled() && watch.gone()) h.cancel();
    auto ev = h.next(std::chrono::milliseconds(250));
    if (!ev) continue;
    if (ev->kind == K::kDone) turn_metrics().observe(ev->usage);
    on_event(*ev);
    if (ev->kind == K::kDone || ev->kind == K::kError) return;
  }
}

Collected collect(engine::RequestHandle& h, const httplib::Request& q) {
  using K = engine::GenEvent::Kind;
  Collected c;
  wait_events(h, q, [&](const engine::GenEvent& ev) {
    switch (ev.kind) {
      case K::kReasoning: c.reasoning += ev.text; break;
      case K::kContent: c.content += ev.text; break;
      case K::kToolCall: c.calls.push_back(ev.call); break;
      case K::kToolCallError: c.tool_errors.push_back(ev); break;
      case K::kDone:
      case K::kError: c.done = ev; break;
      default: break;
    }
  });
  return c;
}

std::shared_ptr<engine::RequestHandle> submit(const Context& c, engine::GenRequest req) {
  try {
    return c.engine.submit(std::move(req));
  } catch (const InputError& e) {
    fail(e.what());
  } catch (const CapacityError& e) {  // can never fit this server's memory: not worth a retry
    throw ApiError{507, "insufficient_storage", e.what(), ""};
  } catch (const Error& e) {
    throw ApiError{503, "overloaded_error", e.what(), ""};
  }
}

}  // namespace ds4::server
