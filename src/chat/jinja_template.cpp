#include "chat/jinja_template.h"

#include "chat/chat_template.h"
#include "chat/jinja_parser.h"

namespace weft::chat {

struct JinjaProgram {
  jinja::Program program;
};

JinjaTemplate::JinjaTemplate(std::string_view source)
    : program_(std::make_shared<const JinjaProgram>(JinjaProgram{jinja::parse(source)})) {}

std::string JinjaTemplate::render(const jinja::Dict& variables, const JinjaRenderOptions& options) const {
  std::tm now{};
  if (options.now) {
    now = *options.now;
  } else {
    const std::time_t t = std::time(nullptr);
    localtime_r(&t, &now);
  }
  jinja::Interpreter in(options.limits, now);
  return in.render(program_->program, variables);
}

std::string JinjaTemplate::render_chat(const ChatContext& c, const JinjaRenderOptions& options) const {
  using jinja::Value;
  jinja::Dict vars;
  vars.set(Value("messages"), c.messages);
  if (!c.tools.is_undefined()) vars.set(Value("tools"), c.tools);
  vars.set(Value("add_generation_prompt"), Value(c.add_generation_prompt));
  vars.set(Value("bos_token"), Value(c.bos_token));
  vars.set(Value("eos_token"), Value(c.eos_token));
  for (const auto& [k, v] : c.extra.items) vars.set(k, v);
  return render(vars, options);
}

jinja::Value messages_value(std::span<const Message> messages) {
  using jinja::Value;
  jinja::List out;
  for (const Message& m : messages) {
    jinja::Dict d;
    d.items.emplace_back(Value("role"), Value(m.role));
    d.items.emplace_back(Value("content"), Value(m.content));
    out.emplace_back(std::move(d));
  }
  return Value(std::move(out));
}

}  // namespace weft::chat
