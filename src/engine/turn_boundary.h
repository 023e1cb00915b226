#pragma once
// Where a chat prompt's last message ends and the generation prompt (the assistant header,
// "<think>" with thinking on) begins. The templates render a past assistant turn differently
// from what the model generated after that header (thinking on: the reasoning the client
// drops, "<think>\n" vs "<think>\n\n</think>", DeepSeek's "</think>" for an old turn), so
// neither the prompt-end nor the turn-end state is a token prefix of the next turn's prompt.
// Everything up to the end of the last message is: the engine ends a prefill chunk there and
// keeps that state (recurrent states cannot be cut back later), in memory and on disk; only
// for prompts that open a reasoning block (thinking on): elsewhere the turn end is reused.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "engine/codec.h"

namespace ds4::engine {

// Tokens of `prompt` (the render of `conv`) before the generation prompt: the render of conv
// without it, when that is a strict, non-empty token prefix of `prompt`; else 0 (no
// generation prompt, a template that renders the past otherwise, a render error).
size_t turn_boundary(const Codec& codec, const tok::Conversation& conv, const std::vector<int32_t>& prompt);

}  // namespace ds4::engine
