// Test helper: the chat templates and goldens under tests/data/chat_templates/.
#pragma once

#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

namespace weft::test_support {

inline const std::string kChatTemplateDir = std::string(WEFT_SOURCE_DIR) + "/tests/data/chat_templates/";

// The whole file (name relative to kChatTemplateDir); a missing one throws, naming it.
inline std::string chat_template_file(const std::string& name) {
  const std::string path = kChatTemplateDir + name;
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("cannot read " + path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace weft::test_support
