// Request bodies of the OpenAI-compatible endpoints, read and validated: a wrong type, a value out
// of range or a missing field is an HttpError(400) naming the field. Unknown fields are ignored
// and null counts as absent, as OpenAI's clients send both.
#pragma once

#include "chat/chat_template.h"
#include "chat/tool_call_parser.h"
#include "core/token.h"
#include "model/grammar.h"
#include "model/sampling.h"
#include "serve/tool_request.h"

#include <nlohmann/json.hpp>

#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace weft::serve {

// The most tokens a request may ask for; more is a mistake, not a wish.
constexpr int64_t kMaxTokensLimit = 1 << 20;

struct GenerationParams {
  int32_t max_tokens = -1;  // max_tokens / max_completion_tokens; -1: until the context is full
  model::SamplingParams sampling;
  std::vector<std::string> stop;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  // Alternatives listed with each token's log-probability (chat: logprobs + top_logprobs;
  // completions: logprobs N); -1: no log-probabilities.
  int32_t top_logprobs = -1;
  // Chat: split the reply into content, reasoning_content and tool_calls (serve/chat_output.h);
  // unset: the reply is all content.
  std::optional<chat::ParseOptions> chat_parse;
  bool parallel_tool_calls = true;
  // Structured output (serve/output_constraint.h): the grammar the reply follows; null: none.
  std::shared_ptr<const model::Grammar> grammar;
};

// A prompt as text (tokenized with special tokens) or as token ids.
using Prompt = std::variant<std::string, std::vector<Token>>;

struct ChatRequest {
  std::vector<chat::Message> messages;
  GenerationParams gen;
  ToolRequest tools;  // tools, tool_choice, tool calls and results in the messages
  // chat_template_kwargs, with a top-level reasoning_effort added as that variable (as
  // llama-server reads both); null: none. The template's own defaults fill the rest.
  BodyJson template_kwargs;
};

struct CompletionRequest {
  std::vector<Prompt> prompts;  // one choice each
  GenerationParams gen;
};

// The field of an object, or null when absent.
const BodyJson& field(const BodyJson& body, const char* name);
// A true/false field; absent or null: fallback (another type: 400 naming it).
bool boolean(const BodyJson& body, const char* name, bool fallback);

// Parses a body into a JSON object (400: malformed, or not an object).
BodyJson parse_body(const std::string& body);

std::vector<chat::Message> parse_messages(const BodyJson& body);
ChatRequest parse_chat_request(const BodyJson& body);
CompletionRequest parse_completion_request(const BodyJson& body);
GenerationParams parse_generation(const BodyJson& body);
// An array of token ids, each in [0, n_vocab) when n_vocab > 0.
std::vector<Token> parse_tokens(const BodyJson& v, const char* field, int32_t n_vocab = 0);

}  // namespace weft::serve
