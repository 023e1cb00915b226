#include "server/server.h"

#include <httplib.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <map>
#include <mutex>

#include "core/error.h"
#include "server/api_common.h"
#include "server/conn_guard.h"
#include "server/http_framing.h"
#include "server/http_server.h"
#include "server/routes.h"
#include "server/batch_metrics.h"
#include "server/turn_metrics.h"
#include "server/speculation_report.h"

namespace ds4::server {

std::string exposure_warning(const engine::Settings& s) {
  if (!s.api_key.empty()) return "";
  const std::string& h = s.host;
  const bool loopback = h == "localhost" || h == "::1" || h == "[::1]" || h.rfind("127.", 0) == 0;
  if (loopback) return "";
  return "listening on " + h + " without an API key: anyone who can reach this address can use the model "
         "(set server.api_key, or --host 127.0.0.1)";
}

bool constant_time_equal(const std::string& a, const std::string& b) {
  // Compare over the longer length so the loop count does not leak the matching prefix.
  const size_t n = std::max(a.size(), b.size());
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? a[i] : 0, y = i < b.size() ? b[i] : 0;
    diff |= x ^ y;
  }
  return diff == 0;
}

namespace {
// GPU canary (SPEC §6), only for a CUDA model: latency histogram (Prometheus convention:
// seconds, cumulative buckets), stalls and the turns they aborted.
std::string canary_metrics_text(const CanaryTotals& t, uint64_t aborts) {
  const char* name = "ds4_gpu_canary_latency_seconds";
  std::string out = std::string("# HELP ") + name + " GPU canary probe latency, launch to completion.\n# TYPE " +
                    name + " histogram\n";
  char line[160];
  for (size_t i = 0; i < kCanaryBuckets; ++i) {
    std::snprintf(line, sizeof line, "%s_bucket{le=\"%g\"} %llu\n", name, kCanaryBucketsMs[i] / 1e3,
                  (unsigned long long)t.le[i]);
    out += line;
  }
  std::snprintf(line, sizeof line, "%s_bucket{le=\"+Inf\"} %llu\n%s_sum %.6f\n%s_count %llu\n", name,
                (unsigned long long)t.count, name, t.sum_ms / 1e3, name, (unsigned long long)t.count);
  out += line;
  out += "# HELP ds4_gpu_canary_stalls_total Canary probes that waited over the stall limit (2 s).\n"
         "# TYPE ds4_gpu_canary_stalls_total counter\nds4_gpu_canary_stalls_total " + std::to_string(t.stalls) + "\n";
  out += "# HELP ds4_gpu_canary_aborted_turns_total Turns aborted by a GPU stall.\n"
         "# TYPE ds4_gpu_canary_aborted_turns_total counter\nds4_gpu_canary_aborted_turns_total " +
         std::to_string(aborts) + "\n";
  return out;
}
}  // namespace

struct Server::Impl {
  engine::Engine& engine;
  engine::Settings settings;
  std::string receipt;
  std::string backend_reason;
  Context ctx;
  ConnGuard guard;  // before http: its watchdog outlives the listener's connections
  HttpServer http;
  Routes routes{http};  // the API routes and their methods (405s)
  std::mutex counts_mu;
  std::map<std::pair<std::string, int>, uint64_t> http_counts;  // (route, status) -> n

  Impl(engine::Engine& e, const engine::Settings& s, std::string r, std::string why)
      : engine(e), settings(s), receipt(std::move(r)), backend_reason(std::move(why)), ctx{e, settings, model_name(s, e)},
        guard(guard_limits(s)) {}

  static GuardLimits guard_limits(const engine::Settings& s) {
    GuardLimits g;
    g.header_timeout_s = s.header_timeout_s;
    g.body_timeout_s = s.body_timeout_s;
    g.max_per_client = s.max_connections_per_client > 0 ? s.max_connections_per_client : std::max(1, s.http_threads / 2);
    g.limit_loopback = s.max_connections_per_client > 0;  // auto: remote peers only
    // Bounded fds (conn_guard.cpp adopt): with 64 workers at most ~640 in use by connections.
    g.max_open_per_client = std::max(16, 2 * s.http_threads);
    g.max_parked = std::max(16, 4 * s.http_threads);
    return g;
  }

  static std::string model_name(const engine::Settings& s, engine::Engine& e) {
    std::string n = e.model_info().name.empty() ? e.model_info().family : e.model_info().name;
    return n.empty() ? s.model : n;
  }

  void count(const httplib::Request& q, int status) {
    std::lock_guard lk(counts_mu);
    http_counts[{route_label(q.path), status}]++;
  }

  // The metrics label of a request path: one of the server's own routes, never the client's
  // text (a raw path could inject lines into /metrics, and every new path would add a series
  // for good).
  static std::string route_label(const std::string& path) {
    static const char* known[] = {"/health", "/metrics", "/v1/chat/completions", "/v1/completions", "/v1/messages",
                                  "/v1/messages/count_tokens", "/v1/models", "/v1/responses"};
    for (const char* k : known)
      if (path == k) return k;
    if (path.rfind("/v1/responses/", 0) == 0) return "/v1/responses/{id}";
    if (path.rfind("/v1/", 0) == 0) return "/v1/other";
    return "static";
  }

  bool authorized(const httplib::Request& q) const {
    if (settings.api_key.empty()) return true;
    std::string got = q.get_header_value("x-api-key");
    const std::string auth = q.get_header_value("Authorization");
    if (got.empty() && auth.rfind("Bearer ", 0) == 0) got = auth.substr(7);
    return constant_time_equal(got, settings.api_key);
  }

  std::string metrics_text();
  void setup();
  bool pre_route(const httplib::Request& q, httplib::Response& r);
  int continue_or_refuse(const httplib::Request& q, httplib::Response& r);
  void refuse(const httplib::Request& q, httplib::Response& r, const ApiError& e, const std::string& allow = "");
};

// A refusal decided before httplib read the body. With a body declared the connection ends after
// the answer: the unread body would be parsed as the next request on it (a request smuggled
// past the key, say); without one it stays open.
void Server::Impl::refuse(const httplib::Request& q, httplib::Response& r, const ApiError& e, const std::string& allow) {
  if (!allow.empty()) r.set_header("Allow", allow);
  const std::string body = error_body(q.path, e);
  if (declares_body(q)) {
    close_after(q, r, e.status, body);
  } else {
    r.status = e.status;
    r.set_content(body, "application/json");
  }
}

// Everything decided from the request line and headers, before httplib reads a body or routes;
// true when answered. The order matters: what the server cannot parse at all (a method it does
// not implement, framing it does not take) comes before what depends on the route.
bool Server::Impl::pre_route(const httplib::Request& q, httplib::Response& r) {
  ConnGuard::headers_read(q.path);
  // A malformed header section: the connection ends after the answer, whatever it declared.
  if (auto h = check_header_fields(q)) {
    close_after(q, r, h->status, error_body(q.path, {h->status, "invalid_request_error", h->message, ""}));
    return true;
  }
  if (auto m = check_method(q)) {
    refuse(q, r, {m->status, "invalid_request_error", m->message, ""});
    return true;
  }
  // Framing: a refusal here is answered before httplib reads (or waits for) a body.
  if (auto f = check_framing(q, settings.max_body_bytes)) {
    close_after(q, r, f->status, error_body(q.path, {f->status, "invalid_request_error", f->message, ""}));
    return true;
  }
  const std::string allow = routes.allowed(q.path);
  if (!settings.cors_origin.empty()) {
    r.set_header("Access-Control-Allow-Origin", settings.cors_origin);
    r.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
    if (q.method == "OPTIONS") {  // the preflight: which request headers the browser may send
      r.set_header("Access-Control-Allow-Headers", cors_allow_headers(q));
      r.set_header("Access-Control-Max-Age", "600");
      r.set_header("Vary", "Access-Control-Request-Headers");
    }
  }
  // OPTIONS: every path when CORS is on (the browser's preflight), else the known ones.
  if (q.method == "OPTIONS" && (!settings.cors_origin.empty() || !allow.empty())) {
    if (!allow.empty()) r.set_header("Allow", allow);
    r.status = 204;
    return true;
  }
  if (!allow.empty() && !routes.allows(q.path, q.method)) {
    refuse(q, r, {405, "invalid_request_error", "method " + q.method + " is not allowed on " + q.path + " (allowed: " + allow + ")", ""},
           allow);
    return true;
  }
  if (q.path.rfind("/v1/", 0) == 0 && !authorized(q)) {
    refuse(q, r, {401, "authentication_error", "invalid or missing API key", ""});
    return true;
  }
  return false;
}

// "Expect: 100-continue": httplib asks this before it routes, and sends 100 Continue when told
// 100. A request the server will refuse gets its final status instead (RFC 9110 §10.1.1), so
// its client does not send a body only to have it refused: the checks of pre_route, and a
// POST to a path no route takes (httplib would read the body, then answer 404).
int Server::Impl::continue_or_refuse(const httplib::Request& q, httplib::Response& r) {
  // httplib writes `r` in full for any answer but 100 and 417 (those two it sends as a bare
  // status line, then reads the body and routes on): a 417 from pre_route (another Expect beside
  // 100-continue) is returned as kWriteResponse, so the client gets it whole and sends no body.
  constexpr int kWriteResponse = 0;
  try {  // (httplib calls this outside its handler try / catch)
    if (pre_route(q, r)) return r.status == 417 ? kWriteResponse : r.status;
    if (q.method == "POST" && routes.allowed(q.path).empty()) {
      const FramingError f = httplib_error(q, 404);
      refuse(q, r, {f.status, "invalid_request_error", f.message, ""});  // with pre_route's CORS headers
      return f.status;
    }
  } catch (const std::exception&) {
    // (routing runs pre_route again inside httplib's handler try / catch: its 500 then)
  }
  // pre_route runs again when httplib routes: the headers it set (CORS) would be doubled.
  // (This server sets no httplib default headers, so nothing else is in r.headers yet.)
  r = httplib::Response{};
  return 100;
}

std::string Server::Impl::metrics_text() {
  auto m = engine.metrics();
  std::string out;
  auto metric = [&](const char* name, const char* type, const char* help, double v) {
    out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n" + name + " " +
           std::to_string(v) + "\n";
  };
  metric("ds4_requests_total", "counter", "Generation requests accepted.", double(m.requests_total));
  metric("ds4_requests_failed_total", "counter", "Generation requests that failed.", double(m.requests_failed));
  metric("ds4_requests_cancelled_total", "counter", "Generation requests cancelled.", double(m.requests_cancelled));
  metric("ds4_prompt_tokens_total", "counter", "Prompt tokens (cached included).", double(m.prompt_tokens));
  metric("ds4_cached_prompt_tokens_total", "counter", "Prompt tokens reused from the prefix cache.", double(m.cached_tokens));
  metric("ds4_computed_prompt_tokens_total", "counter", "Prompt tokens computed.", double(m.computed_prompt_tokens));
  metric("ds4_generated_tokens_total", "counter", "Sampled tokens.", double(m.generated_tokens));
  metric("ds4_cache_hits_total", "counter", "Requests that reused a cached prefix.", double(m.cache_hits));
  metric("ds4_cache_misses_total", "counter", "Requests without a usable cached prefix.", double(m.cache_misses));
  metric("ds4_cache_evictions_total", "counter", "Prefix cache entries evicted.", double(m.cache_evictions));
  metric("ds4_cache_bytes", "gauge", "Bytes held by the prefix cache.", double(m.cache_bytes));
  metric("ds4_cache_entries", "gauge", "Prefix cache entries.", double(m.cache_entries));
  metric("ds4_queue_depth", "gauge", "Requests waiting for a session slot.", double(m.queue_depth));
  metric("ds4_live_sessions", "gauge", "Sessions being stepped.", double(m.live));
  out += batch_metrics_text(m);
  metric("ds4_prefill_seconds_total", "counter", "Time spent in prefill.", m.prefill_seconds);
  metric("ds4_decode_seconds_total", "counter", "Time from first token to finish, summed over requests.", m.decode_seconds);
  // (ds4_prefill_tokens_per_second is TurnMetrics' per-turn histogram: one name, one type)
  metric("ds4_overall_prefill_tokens_per_second", "gauge", "Computed prompt tokens / prefill seconds, all turns.",
         m.prefill_seconds > 0 ? double(m.computed_prompt_tokens) / m.prefill_seconds : 0.0);
  metric("ds4_decode_tokens_per_second", "gauge", "Generated tokens / decode seconds (per session).",
         m.decode_seconds > 0 ? double(m.generated_tokens) / m.decode_seconds : 0.0);
  const auto& ck = m.checkpoints;  // on-disk session checkpoints (zero when checkpoint.dir is unset)
  metric("ds4_checkpoint_saves_total", "counter", "Session checkpoints written to disk.", double(ck.saves));
  metric("ds4_checkpoint_save_failures_total", "counter", "Checkpoint saves that failed (the chat went on).", double(ck.save_failures));
  metric("ds4_checkpoint_restores_total", "counter", "Sessions continued from a disk checkpoint.", double(ck.restores));
  metric("ds4_checkpoint_rejected_total", "counter", "Checkpoint files refused (corrupt, truncated, foreign).", double(ck.rejected));
  metric("ds4_checkpoint_evictions_total", "counter", "Checkpoint files evicted by the byte budget.", double(ck.evictions));
  metric("ds4_checkpoint_bytes_written_total", "counter", "Bytes of checkpoint files written.", double(ck.bytes_written));
  metric("ds4_checkpoint_bytes_read_total", "counter", "Bytes of checkpoint files restored.", double(ck.bytes_read));
  long rss_kb = 0;
  if (FILE* f = std::fopen("/proc/self/statm", "r")) {
    long pages = 0, resident = 0;
    if (std::fscanf(f, "%ld %ld", &pages, &resident) == 2) rss_kb = resident * 4;
    std::fclose(f);
  }
  metric("ds4_resident_memory_bytes", "gauge", "Resident memory of the server process.", double(rss_kb) * 1024.0);
  if (m.canary) out += canary_metrics_text(*m.canary, m.canary_aborts);
  out += turn_metrics().text(engine.model_info().family);
  const GuardStats g = guard.stats();
  metric("ds4_http_connections_total", "counter", "HTTP connections accepted.", double(g.accepted));
  metric("ds4_http_connections_refused_total", "counter", "Connections refused (503): over a per-client limit or the parked limit.", double(g.refused));
  metric("ds4_http_header_timeouts_total", "counter", "Connections closed: headers not received in time.", double(g.header_timeouts));
  metric("ds4_http_body_timeouts_total", "counter", "Connections closed: body not received in time.", double(g.body_timeouts));
  metric("ds4_http_closed_after_refusal_total", "counter", "Connections closed after a refusal sent before the body was read.",
         double(g.closed_after_refusal));
  metric("ds4_http_connections_parked", "gauge", "Connections accepted whose headers are not in yet (no thread held).", double(g.parked));
  out += "# HELP ds4_http_requests_total HTTP requests by route and status.\n# TYPE ds4_http_requests_total counter\n";
  std::lock_guard lk(counts_mu);
  for (const auto& [k, v] : http_counts)
    out += "ds4_http_requests_total{route=\"" + k.first + "\",status=\"" + std::to_string(k.second) + "\"} " +
           std::to_string(v) + "\n";
  return out;
}

void Server::Impl::setup() {
  // A client that goes away mid-write must cost an EPIPE, not the process (httplib 0.11
  // sends without MSG_NOSIGNAL).
  std::signal(SIGPIPE, SIG_IGN);
  http.new_task_queue = [this, n = settings.http_threads] { return guard.new_task_queue(size_t(n)); };
  http.set_payload_max_length(size_t(settings.max_body_bytes));
  // The guard's deadlines (settings server.header_timeout_s / body_timeout_s) answer a stall
  // with a 408; httplib's own read timeout (a bare 400) only backs them up.
  const double read_timeout_s = backstop_read_timeout_s(guard_limits(settings));
  http.set_read_timeout(time_t(read_timeout_s), 0);
  http.set_pre_routing_handler([this](const httplib::Request& q, httplib::Response& r) {
    return pre_route(q, r) ? httplib::Server::HandlerResponse::Handled : httplib::Server::HandlerResponse::Unhandled;
  });
  http.set_expect_100_continue_handler(
      [this](const httplib::Request& q, httplib::Response& r) { return continue_or_refuse(q, r); });
  http.set_post_routing_handler([this](const httplib::Request& q, httplib::Response& r) {
    ConnGuard::response_started(r.is_chunked_content_provider_);
    count(q, r.status);
  });
  http.set_exception_handler([](const httplib::Request& q, httplib::Response& r, std::exception_ptr ep) {
    ApiError e{500, "server_error", "internal error", ""};
    try {
      std::rethrow_exception(ep);
    } catch (const ApiError& a) {
      e = a;
    } catch (const InputError& x) {
      e = {400, "invalid_request_error", x.what(), ""};
    } catch (const json::exception&) {
      // A JSON type error escaped the typed getters: the client's value, but never the
      // library's text (it names no field and leaks internals).
      e = {400, "invalid_request_error", "a value in the request body has the wrong type", ""};
    } catch (const std::exception& x) {
      e.message = x.what();
    }
    r.status = e.status;
    r.set_content(error_body(q.path, e), "application/json");
  });
  http.set_error_handler([](const httplib::Request& q, httplib::Response& r) {
    // A handler or the guard already wrote the answer (JSON body or close_after's provider).
    if (!r.body.empty() || r.content_length_ > 0) return;
    const FramingError f = httplib_error(q, r.status);
    const std::string body = error_body(request_path(q), {f.status, "invalid_request_error", f.message, ""});
    // httplib's own errors other than 404 (a bad request line or headers, a body it could not
    // read): the stream is out of step, so the connection ends after the answer.
    if (f.status != 404) close_after(q, r, f.status, body);
    else r.set_content(body, "application/json");
  });
  register_openai(routes, ctx);
  register_anthropic(routes, ctx);
  routes.get("/health", [this](const httplib::Request&, httplib::Response& r) {
    auto m = engine.metrics();
    json j = {{"status", "ok"}, {"model", ctx.model_name}, {"family", engine.model_info().family},
              {"sampler", engine::sampler_kind_name(engine.sampler_kind())}, {"context_size", engine.context_size()},
              {"prefill_chunk", engine.prefill_chunk()}, {"queue_depth", m.queue_depth}, {"live_sessions", m.live},
              {"backend", settings.backend}, {"settings", receipt}};
    if (!backend_reason.empty()) j["backend_reason"] = backend_reason;
    if (const std::string w = exposure_warning(settings); !w.empty()) j["warnings"] = json::array({w});
    j["speculation"] = speculation_json(engine);
    r.set_content(dump(j), "application/json");
  });
  routes.get("/metrics", [this](const httplib::Request&, httplib::Response& r) {
    r.set_content(metrics_text(), "text/plain; version=0.0.4");
  });
  // Static page + Debian's marked/highlight.js copies (no CDN).
  http.set_mount_point("/vendor", settings.js_root);
  http.set_mount_point("/", settings.web_root);
}

Server::Server(engine::Engine& engine, const engine::Settings& settings, std::string receipt, std::string backend_reason)
    : impl_(std::make_unique<Impl>(engine, settings, std::move(receipt), std::move(backend_reason))) {
  impl_->setup();
}

Server::~Server() { stop(); }

int Server::bind() {
  const auto& s = impl_->settings;
  if (s.port == 0) {
    int p = impl_->http.bind_to_any_port(s.host);
    if (p <= 0) throw Error("cannot bind " + s.host);
    impl_->guard.set_port(p);
    impl_->http.widen_backlog();
    return p;
  }
  if (!impl_->http.bind_to_port(s.host, s.port)) throw Error("cannot bind " + s.host + ":" + std::to_string(s.port));
  impl_->guard.set_port(s.port);
  impl_->http.widen_backlog();
  return s.port;
}

void Server::serve() { impl_->http.listen_after_bind(); }

void Server::stop() {
  if (!impl_) return;
  // Cancel generations first so streaming handlers finish, then stop the listener.
  impl_->engine.shutdown();
  impl_->http.stop();
}

}  // namespace ds4::server
