// ds4server chat: interactive streaming chat in the terminal (reasoning dimmed; Ctrl-C
// cancels the running turn and only it, at the prompt it just gives a fresh prompt; Ctrl-D or
// /quit leaves; /reset starts over).
#include <atomic>
#include <csignal>
#include <cstdio>
#include <iostream>

#include "apps/ds4server/app_model.h"
#include "apps/ds4server/commands.h"
#include "core/error.h"
#include "engine/rng.h"

namespace ds4::cli {
namespace {
std::atomic<bool> g_interrupt{false};
void on_sigint(int) { g_interrupt = true; }

engine::GenRequest turn_request(const engine::Settings& s, const engine::Engine& e, const tok::Conversation& conv) {
  engine::GenRequest r;
  r.conv = conv;
  auto eff = server::effective_settings(s, e);
  r.sampler.temperature = *eff.temperature;
  r.sampler.top_p = *eff.top_p;
  r.sampler.top_k = *eff.top_k;
  r.sampler.min_p = *eff.min_p;
  r.sampler.seed = eff.seed ? *eff.seed : engine::fresh_seed();  // auto: a fresh draw per turn
  r.max_tokens = s.default_max_tokens;
  return r;
}

// Streams one turn to stdout; returns the answer (content) and whether it was cancelled.
std::string stream_turn(engine::RequestHandle& h, bool tty, bool* cancelled) {
  using K = engine::GenEvent::Kind;
  std::string answer;
  bool in_reasoning = false;
  for (;;) {
    if (g_interrupt.exchange(false)) h.cancel();
    auto ev = h.next(std::chrono::milliseconds(50));
    if (!ev) continue;
    if (ev->kind == K::kReasoning) {
      if (tty && !in_reasoning) std::fputs("\x1b[2m", stdout);
      in_reasoning = true;
      std::fputs(ev->text.c_str(), stdout);
    } else if (ev->kind == K::kContent || ev->kind == K::kToolCall) {
      if (tty && in_reasoning) std::fputs("\x1b[0m\n", stdout);
      in_reasoning = false;
      std::string t = ev->kind == K::kContent ? ev->text : "[tool call " + ev->call.name + " " + ev->call.arguments + "]";
      answer += ev->kind == K::kContent ? ev->text : "";
      std::fputs(t.c_str(), stdout);
    } else if (ev->kind == K::kError) {
      throw Error(ev->text);
    } else if (ev->kind == K::kDone) {
      if (tty && in_reasoning) std::fputs("\x1b[0m", stdout);
      *cancelled = ev->finish == engine::Finish::kCancelled;
      const auto& u = ev->usage;
      std::fprintf(stderr, "\n[%lld prompt (%lld cached), %lld generated, ttft %.2fs, %.1f tok/s, %s]\n",
                   (long long)u.prompt_tokens, (long long)u.cached_tokens, (long long)u.completion_tokens, u.ttft_s,
                   u.decode_s > 0 ? double(u.completion_tokens) / u.decode_s : 0.0, engine::finish_name(ev->finish));
      return answer;
    }
    std::fflush(stdout);
  }
}
}  // namespace

int cmd_chat(const Args& args) {
  engine::Settings s;
  engine::apply_cli(s, args, {});
  auto l = load_for_settings(s);
  const std::string comment = server::backend_comment(l);
  engine::Engine eng(std::move(l.model), std::move(l.codec), server::engine_options(s, l));
  std::fputs((comment + engine::settings_yaml(server::effective_settings(s, eng), true)).c_str(), stderr);
  // No SA_RESTART: a Ctrl-C at the prompt interrupts the read, so it can give a fresh prompt
  // instead of waiting there and cancelling the next turn the moment it starts (issue #25).
  struct sigaction sa {};
  sa.sa_handler = on_sigint;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  const bool tty = isatty(fileno(stdout));
  tok::Conversation conv;
  conv.thinking = tok::thinking_from_name(s.thinking);
  std::string line;
  for (;;) {
    g_interrupt = false;  // before the prompt: a Ctrl-C from here on interrupts the read below
    std::fputs("\n> ", stdout);
    std::fflush(stdout);
    if (!std::getline(std::cin, line)) {
      if (!g_interrupt.exchange(false)) break;  // Ctrl-D / end of input
      // Ctrl-C at the prompt: nothing runs, so nothing to cancel; a fresh prompt.
      std::cin.clear();
      clearerr(stdin);
      std::fputs("\n(Ctrl-C cancels a running turn; Ctrl-D or /quit leaves)", stdout);
      continue;
    }
    // A Ctrl-C that came while the line was typed, or just after the last turn, belongs to
    // no turn: only one pressed while this turn runs cancels it.
    g_interrupt = false;
    if (line == "/quit") break;
    if (line == "/reset") {
      conv.messages.clear();
      continue;
    }
    if (line.empty()) continue;
    conv.messages.push_back({"user", line, {}, {}, {}, {}});
    auto h = eng.submit(turn_request(s, eng, conv));
    bool cancelled = false;
    std::string answer = stream_turn(*h, tty, &cancelled);
    if (cancelled) std::fputs("\n[cancelled]", stderr);
    conv.messages.push_back({"assistant", answer, {}, {}, {}, {}});
  }
  return 0;
}

}  // namespace ds4::cli
