// GET /: a one-file chat page (src/serve/chat_page.html, built into the binary by CMake).
#pragma once

#include <string_view>

namespace weft::serve {

std::string_view chat_page_html();

}  // namespace weft::serve
