#pragma once
// Opening the configured model with its tokenizer/template codec (shared by serve/chat/run).
#include "server/serve.h"

namespace ds4::cli {
server::Loaded load_for_settings(const engine::Settings& s);
}  // namespace ds4::cli
