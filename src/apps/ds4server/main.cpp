// ds4server: one binary, one subcommand per job. Errors end with a message and exit code 1
// (2 for usage errors), never a crash.
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "apps/ds4server/commands.h"
#include "core/error.h"

namespace ds4::cli {
int cmd_version(const Args&) {
  std::printf("ds4server 0.1.0\n");
  return 0;
}
}  // namespace ds4::cli

namespace {
struct Command {
  const char* name;
  int (*run)(const ds4::cli::Args&);
  const char* help;
};

const Command kCommands[] = {
    {"version", ds4::cli::cmd_version, "print the version"},
    {"inspect", ds4::cli::cmd_inspect, "show a model file's format, metadata and tensors"},
    {"tokenize", ds4::cli::cmd_tokenize, "text -> token ids (--tokenizer PATH [--json] [--special] TEXT|-)"},
    {"detokenize", ds4::cli::cmd_detokenize, "token ids -> text (--tokenizer PATH IDS...)"},
    {"chat-template", ds4::cli::cmd_chat_template, "render / continue / parse chats (--family F --tokenizer PATH [--jsonl])"},
    {"serve", ds4::cli::cmd_serve, "OpenAI + Anthropic server and web chat (--model PATH --config FILE --port N --print-config)"},
    {"chat", ds4::cli::cmd_chat, "interactive chat in the terminal (--model PATH; Ctrl-C cancels a turn)"},
    {"run", ds4::cli::cmd_run, "generate tokens with a model (--model PATH --tokens IDS)"},
    {"logits", ds4::cli::cmd_logits, "logits over a token file, fed in several ways (reference fuzzer)"},
};

// Asked-for help goes to stdout and succeeds; usage after a mistake goes to stderr and fails.
int usage(std::FILE* to = stderr, int rc = 2) {
  std::fprintf(to, "usage: ds4server COMMAND [ARGS...]\ncommands:\n");
  for (const auto& c : kCommands) std::fprintf(to, "  %-12s %s\n", c.name, c.help);
  return rc;
}
}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return usage();
  std::string name = argv[1];
  if (name == "--help" || name == "-h" || name == "help") return usage(stdout, 0);
  ds4::cli::Args args(argv + 2, argv + argc);
  for (const auto& c : kCommands) {
    if (name != c.name) continue;
    try {
      return c.run(args);
    } catch (const ds4::InputError& e) {
      std::fprintf(stderr, "ds4server %s: %s\n", c.name, e.what());
      return 1;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "ds4server %s: error: %s\n", c.name, e.what());
      return 1;
    }
  }
  std::fprintf(stderr, "ds4server: unknown command '%s'\n", name.c_str());
  return usage();
}
