// Internal: one renderer per template family, each writing what llama.cpp's
// llm_chat_apply_template writes for it (src/llama-chat.cpp).
#pragma once

#include "chat/chat_template.h"

#include <span>
#include <string>
#include <string_view>

namespace weft::chat::detail {

std::string render(Family f, std::span<const Message> chat, bool add_ass);

// llama.cpp's trim(): isspace (C locale) from both ends.
std::string trim(std::string_view s);

}  // namespace weft::chat::detail
