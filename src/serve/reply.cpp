#include "serve/reply.h"

#include "serve/http_error.h"

#include <fmt/format.h>

#include <chrono>
#include <random>

namespace weft::serve {

using nlohmann::json;

json usage_json(const runtime::JobUsage& u) {
  return {{"prompt_tokens", u.prompt_tokens},
          {"completion_tokens", u.completion_tokens},
          {"total_tokens", u.prompt_tokens + u.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", u.cached_tokens}}}};
}

void add_usage(runtime::JobUsage& a, const runtime::JobUsage& b) {
  a.prompt_tokens += b.prompt_tokens;
  a.cached_tokens += b.cached_tokens;
  a.completion_tokens += b.completion_tokens;
}

Reply::Reply(Endpoint kind, std::string model)
    : kind_(kind),
      model_(std::move(model)),
      created_(std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
                   .count()) {
  std::random_device rd;
  id_ = fmt::format("{}-{:08x}{:08x}{:08x}", kind == Endpoint::Chat ? "chatcmpl" : "cmpl", rd(), rd(), rd());
}

json Reply::envelope(bool chunk) const {
  const char* object =
      kind_ == Endpoint::Chat ? (chunk ? "chat.completion.chunk" : "chat.completion") : "text_completion";
  return {{"id", id_}, {"object", object}, {"created", created_}, {"model", model_}};
}

json Reply::whole(const std::vector<Choice>& choices, const runtime::JobUsage& usage) const {
  json j = envelope(false);
  json list = json::array();
  for (size_t i = 0; i < choices.size(); ++i) {
    json c = {{"index", i}, {"finish_reason", runtime::finish_reason_name(choices[i].reason)}};
    if (kind_ == Endpoint::Chat) {
      c["message"] = {{"role", "assistant"}, {"content", choices[i].text}};
    } else {
      c["text"] = choices[i].text;
      c["logprobs"] = nullptr;
    }
    list.push_back(std::move(c));
  }
  j["choices"] = std::move(list);
  j["usage"] = usage_json(usage);
  return j;
}

json Reply::delta_choice(size_t index, json delta) const {
  json c = {{"index", index}, {"finish_reason", nullptr}};
  if (kind_ == Endpoint::Chat) {
    c["delta"] = std::move(delta);
  } else {
    c["text"] = delta.value("content", "");
    c["logprobs"] = nullptr;
  }
  json j = envelope(true);
  j["choices"] = json::array({std::move(c)});
  return j;
}

json Reply::role_chunk(size_t index) const { return delta_choice(index, {{"role", "assistant"}, {"content", ""}}); }

json Reply::text_chunk(size_t index, const std::string& text) const { return delta_choice(index, {{"content", text}}); }

json Reply::finish_chunk(size_t index, runtime::FinishReason reason) const {
  json j = delta_choice(index, json::object());
  j["choices"][0]["finish_reason"] = runtime::finish_reason_name(reason);
  return j;
}

json Reply::usage_chunk(const runtime::JobUsage& usage) const {
  json j = envelope(true);
  j["choices"] = json::array();
  j["usage"] = usage_json(usage);
  return j;
}

std::string sse_event(const json& data) { return "data: " + dump(data) + "\n\n"; }

}  // namespace weft::serve
