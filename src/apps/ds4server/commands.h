#pragma once
// Subcommands of `ds4server`. Each takes argv after the subcommand name and returns the exit code.
#include <string>
#include <vector>

namespace ds4::cli {
using Args = std::vector<std::string>;
int cmd_version(const Args& args);
int cmd_inspect(const Args& args);
int cmd_tokenize(const Args& args);
int cmd_detokenize(const Args& args);
int cmd_chat_template(const Args& args);
int cmd_serve(const Args& args);
int cmd_chat(const Args& args);
int cmd_run(const Args& args);
int cmd_logits(const Args& args);
}  // namespace ds4::cli
