// Reply bodies of /v1/chat/completions and /v1/completions in OpenAI's shapes: the whole reply,
// or the chunks of a stream (each sent as a server-sent event "data: {...}").
#pragma once

#include "runtime/scheduler.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace weft::serve {

enum class Endpoint { Chat, Completion };

struct Choice {
  std::string text;
  runtime::FinishReason reason = runtime::FinishReason::Length;
  std::optional<std::vector<runtime::PieceLogprobs>> logprobs;  // asked for: one per token
  std::optional<nlohmann::json> message;                        // chat: the reply split (chat_output.h) instead of text
};

nlohmann::json usage_json(const runtime::JobUsage& u);
// Adds b to a (the usage of a request with several prompts).
void add_usage(runtime::JobUsage& a, const runtime::JobUsage& b);

class Reply {
 public:
  Reply(Endpoint kind, std::string model);  // a fresh id; created: now

  nlohmann::json whole(const std::vector<Choice>& choices, const runtime::JobUsage& usage) const;
  // Stream chunks: the chat stream opens each choice naming the role; text deltas; the chunk
  // that ends a choice; the usage chunk (stream_options.include_usage), with no choices.
  nlohmann::json role_chunk(size_t index) const;
  // With log-probabilities (`logprobs` set): those of the tokens the text completes, text_offset
  // being where the text starts in the choice's whole text (the completions shape counts from it).
  nlohmann::json text_chunk(size_t index, const std::string& text,
                            const std::vector<runtime::PieceLogprobs>* logprobs = nullptr,
                            size_t text_offset = 0) const;
  // tool_calls: the choice made calls, so a stop is "tool_calls" as in llama-server.
  nlohmann::json finish_chunk(size_t index, runtime::FinishReason reason, bool tool_calls = false) const;
  // A chat delta of any fields (reasoning_content, tool_calls: chat_output.h's ChatDeltas).
  nlohmann::json delta_chunk(size_t index, nlohmann::json delta) const { return delta_choice(index, std::move(delta)); }
  nlohmann::json usage_chunk(const runtime::JobUsage& usage) const;

 private:
  nlohmann::json envelope(bool chunk) const;
  nlohmann::json delta_choice(size_t index, nlohmann::json delta) const;
  // Chat: {"content": [{token, logprob, bytes, top_logprobs}]}; completions (the legacy shape):
  // {tokens, token_logprobs, top_logprobs: [{text: logprob}], text_offset}.
  nlohmann::json logprobs_json(const std::vector<runtime::PieceLogprobs>& lp, size_t text_offset) const;

  Endpoint kind_;
  std::string id_, model_;
  int64_t created_;
};

// One server-sent event.
std::string sse_event(const nlohmann::json& data);
inline constexpr const char* kSseDone = "data: [DONE]\n\n";

}  // namespace weft::serve
