// libFuzzer entry point for the Jinja engine: any template text must parse and render, or throw
// weft::Error, within its limits; a crash, a sanitizer report, another exception type or a hang
// (libFuzzer's -timeout) is a bug. A chat template can come from a downloaded model file.
// Seeds: tests/data/chat_templates/*.jinja.
#include "chat/jinja_json.h"
#include "chat/jinja_template.h"
#include "core/error.h"

#include <cstddef>
#include <cstdint>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using weft::chat::jinja::Value;
  static const Value messages = weft::chat::jinja::from_json(nlohmann::ordered_json::parse(
      R"([{"role": "system", "content": "S"}, {"role": "user", "content": "Hi"},
          {"role": "assistant", "content": "ok", "tool_calls": [{"function": {"name": "f", "arguments": {"a": 1}}}]},
          {"role": "tool", "content": "{\"r\": 2}"}])"));
  weft::chat::ChatContext c;
  c.messages = messages;
  c.add_generation_prompt = true;
  c.bos_token = "<s>";
  c.eos_token = "</s>";
  weft::chat::JinjaRenderOptions o;
  o.limits.max_steps = 200'000;  // a fraction of a second: libFuzzer's timeout stays meaningful
  o.limits.max_output_bytes = o.limits.max_string_bytes = 1 << 20;
  try {
    const weft::chat::JinjaTemplate t(std::string_view(reinterpret_cast<const char*>(data), size));
    t.render_chat(c, o);
  } catch (const weft::Error&) {
  }
  return 0;
}
