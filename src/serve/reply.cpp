#include "serve/reply.h"

#include "serve/http_error.h"

#include <fmt/format.h>

#include <chrono>
#include <random>

namespace weft::serve {

using nlohmann::json;

namespace {
std::string_view finish_name(runtime::FinishReason r, bool tool_calls) {
  return r == runtime::FinishReason::Stop && tool_calls ? "tool_calls" : runtime::finish_reason_name(r);
}
}  // namespace

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
    const json* message = choices[i].message ? &*choices[i].message : nullptr;
    json c = {{"index", i},
              {"finish_reason", finish_name(choices[i].reason, message && message->contains("tool_calls"))}};
    if (message) {
      c["message"] = *message;
    } else if (kind_ == Endpoint::Chat) {
      c["message"] = {{"role", "assistant"}, {"content", choices[i].text}};
    } else {
      c["text"] = choices[i].text;
      c["logprobs"] = nullptr;
    }
    if (choices[i].logprobs) c["logprobs"] = logprobs_json(*choices[i].logprobs, 0);
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

json Reply::text_chunk(size_t index, const std::string& text, const std::vector<runtime::PieceLogprobs>* logprobs,
                       size_t text_offset) const {
  json j = delta_choice(index, {{"content", text}});
  if (logprobs) j["choices"][0]["logprobs"] = logprobs_json(*logprobs, text_offset);
  return j;
}

namespace {
// A token's bytes as numbers (its piece may end inside a UTF-8 character; "token" then shows the
// replacement character where the JSON needs whole ones).
json bytes_json(const std::string& piece) {
  json b = json::array();
  for (unsigned char c : piece) b.push_back(c);
  return b;
}
json prob_json(const runtime::PieceProb& p) {
  return {{"token", p.piece}, {"logprob", p.logprob}, {"bytes", bytes_json(p.piece)}};
}
}  // namespace

json Reply::logprobs_json(const std::vector<runtime::PieceLogprobs>& lp, size_t text_offset) const {
  if (kind_ == Endpoint::Chat) {
    json content = json::array();
    for (const auto& t : lp) {
      json e = prob_json(t.sampled);
      e["top_logprobs"] = json::array();
      for (const auto& p : t.top) e["top_logprobs"].push_back(prob_json(p));
      content.push_back(std::move(e));
    }
    return {{"content", std::move(content)}};
  }
  json tokens = json::array(), token_logprobs = json::array(), top = json::array(), offsets = json::array();
  for (const auto& t : lp) {
    tokens.push_back(t.sampled.piece);
    token_logprobs.push_back(t.sampled.logprob);
    json alternatives = json::object();
    for (const auto& p : t.top)  // two tokens of one text: the likelier one's (listed first)
      if (!alternatives.contains(p.piece)) alternatives[p.piece] = p.logprob;
    top.push_back(std::move(alternatives));
    offsets.push_back(text_offset);
    text_offset += t.sampled.piece.size();
  }
  return {{"tokens", std::move(tokens)},
          {"token_logprobs", std::move(token_logprobs)},
          {"top_logprobs", std::move(top)},
          {"text_offset", std::move(offsets)}};
}

json Reply::finish_chunk(size_t index, runtime::FinishReason reason, bool tool_calls) const {
  json j = delta_choice(index, json::object());
  j["choices"][0]["finish_reason"] = finish_name(reason, tool_calls);
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
