#pragma once
// Shared by the OpenAI and Anthropic handlers: typed JSON field access that turns wrong
// types into 400s naming the field, sampler/thinking resolution, ids, SSE writing and the
// event pump that relays engine events with keepalives and cancels on disconnect.
#include <httplib.h>

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "engine/engine.h"
#include "engine/settings.h"
#include "server/routes.h"

namespace ds4::server {

using json = nlohmann::json;

// A request the client got wrong (or auth); rendered in the protocol's error shape.
struct ApiError {
  int status = 400;
  std::string type = "invalid_request_error";
  std::string message;
  std::string param;
};

// The error body of each protocol: Anthropic's {"type":"error","error":{type, message}} on
// /v1/messages*, OpenAI's {"error":{message, type, param, code}} everywhere else. The one
// place error bodies are built: route handlers, httplib's errors and the connection guard.
enum class ErrorShape { kOpenAI, kAnthropic };
ErrorShape error_shape(const std::string& path);
// `code`: OpenAI's "code" field (e.g. "request_timeout"); empty = null (401: invalid_api_key).
std::string error_body(ErrorShape shape, const ApiError& e, const std::string& code = "");
std::string error_body(const std::string& path, const ApiError& e);
[[noreturn]] void fail(const std::string& message, const std::string& param = "", int status = 400);

json parse_body(const httplib::Request& req);
// Typed optional getters: absent or null -> nullopt; wrong type -> ApiError naming `key`, as
// `where.key` when `where` (the path of `j` in the body, e.g. "messages[2]") is given: a
// field of a nested object is named by its whole path, never by its bare key.
std::optional<std::string> get_string(const json& j, const char* key, const std::string& where = "");
std::optional<double> get_number(const json& j, const char* key, const std::string& where = "");
std::optional<int64_t> get_int(const json& j, const char* key, const std::string& where = "");
std::optional<bool> get_bool(const json& j, const char* key, const std::string& where = "");
const json* get_array(const json& j, const char* key, const std::string& where = "");   // nullptr if absent
const json* get_object(const json& j, const char* key, const std::string& where = "");  // nullptr if absent

// A function tool as the family templates take it, {"type":"function","function":{name,
// description, parameters}}, from the fields of tools[i] (Anthropic: input_schema; Responses:
// parameters). Each field type-checked: a 400 naming tools[i].<field>, never a JSON exception.
std::string function_tool(const json& t, size_t i, const char* schema_key);

struct Context {
  engine::Engine& engine;
  const engine::Settings& settings;
  std::string model_name;
};

// Family defaults <- settings <- request values. A request's temperature above
// `max_temperature` (its protocol's range: OpenAI 2, Anthropic 1) or below 0 is a 400.
engine::SamplerParams resolve_sampler(const Context& c, const json& body, double max_temperature = 2.0);
tok::Thinking thinking_from_settings(const engine::Settings& s);
int64_t resolve_max_tokens(const Context& c, std::optional<int64_t> requested);
std::vector<std::string> stop_list(const json& body, const char* key);

// The usage fields every protocol adds to its own token counts (one serializer for all):
// "timings" {ttft_s, prefill_s, decode_s} and "speculative" {mode, drafted, accepted, bonus,
// acceptance, repairs, full_replays, draft_s, verify_s, commit_s}; mode "target_only" when
// no draft head ran (engine/request.h Usage); "gpu_canary" {samples, p50_ms, p95_ms, p99_ms,
// max_ms, stalls} only when the model runs on CUDA (SPEC §6). Not in the OpenAI/Anthropic schemas: the SDKs
// keep unknown fields (model_extra), the web page and ds4-eval read them.
json usage_extras(const engine::Usage& u);

tok::Message make_message(std::string role, std::string content);
std::string new_id(const std::string& prefix);
int64_t unix_now();
std::string dump(const json& j);  // invalid UTF-8 replaced, never throws

// Starts an SSE response: chunked for HTTP/1.1. HTTP/1.0 has no chunked coding: the events go
// out as they are, with Connection: close, and the stream ends with the connection (RFC 9112
// §6.3: a response without a length is delimited by the close).
void start_sse(const httplib::Request& q, httplib::Response& r, httplib::ContentProviderWithoutLength provider);

// SSE: "event: NAME\n" (when name non-empty) + "data: JSON\n\n".
bool sse_write(httplib::DataSink& sink, const std::string& event, const std::string& data);

// Relays events to `on_event` until kDone/kError. Sends `keepalive` (raw SSE text) when no
// event came for a second and on prefill progress. If a write fails (client gone) the
// request is cancelled and false is returned.
bool pump(engine::RequestHandle& h, httplib::DataSink& sink, const std::string& keepalive,
          const std::function<bool(const engine::GenEvent&)>& on_event);

// Non-streaming: hands every event to `on_event` until kDone/kError (inclusive). When the
// client of `q` disconnects, the request is cancelled (the engine then finishes it as
// kCancelled: slot freed, nothing published) and the events still run to the end.
void wait_events(engine::RequestHandle& h, const httplib::Request& q,
                 const std::function<void(const engine::GenEvent&)>& on_event);
// Non-streaming: all events folded into one result.
struct Collected {
  std::string reasoning, content;
  std::vector<tok::ToolCall> calls;
  std::vector<engine::GenEvent> tool_errors;  // kToolCallError events
  engine::GenEvent done;  // kind kDone (or kError with text)
};
Collected collect(engine::RequestHandle& h, const httplib::Request& q);

// Engine submit with InputError -> 400.
std::shared_ptr<engine::RequestHandle> submit(const Context& c, engine::GenRequest req);

void register_openai(Routes& svr, Context& c);
void register_anthropic(Routes& svr, Context& c);

}  // namespace ds4::server
