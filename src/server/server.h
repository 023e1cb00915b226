#pragma once
// The HTTP front: routes of both protocols, auth, CORS, limits, errors in each protocol's
// shape, /health with the settings receipt, /metrics (Prometheus text), the web page.
#include <memory>
#include <string>

#include "engine/engine.h"
#include "engine/settings.h"

namespace ds4::server {

class Server {
 public:
  // `receipt`: the effective settings (YAML) shown by /health, with settings.backend and
  // `backend_reason` (why that backend: engine/backend_choice.h; empty = not shown).
  Server(engine::Engine& engine, const engine::Settings& settings, std::string receipt,
         std::string backend_reason = "");
  ~Server();
  // Binds host:port (port 0 = any free port); returns the bound port. Throws on failure.
  int bind();
  // Serves until stop(). Blocking.
  void serve();
  // Stops accepting, cancels in-flight generations, returns once listen() has returned.
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// A warning when the server listens beyond loopback without an API key; empty otherwise.
std::string exposure_warning(const engine::Settings& s);

// Constant-time equality (API keys): the time depends on the lengths only.
bool constant_time_equal(const std::string& a, const std::string& b);

}  // namespace ds4::server
