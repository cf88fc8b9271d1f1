#include "serve/request.h"

#include "core/error.h"
#include "model/logprobs.h"
#include "serve/http_error.h"
#include "serve/output_constraint.h"

#include <algorithm>

namespace weft::serve {

const BodyJson& field(const BodyJson& body, const char* name) {
  static const BodyJson null_value;
  const auto it = body.find(name);
  return it == body.end() ? null_value : *it;
}

bool boolean(const BodyJson& body, const char* name, bool fallback) {
  const BodyJson& v = field(body, name);
  if (v.is_null()) return fallback;
  if (!v.is_boolean()) reject(400, "'{}' must be true or false, got {}", name, v.type_name());
  return v.get<bool>();
}

namespace {

double number(const BodyJson& body, const char* name, double lo, double hi, double fallback) {
  const BodyJson& v = field(body, name);
  if (v.is_null()) return fallback;
  if (!v.is_number()) reject(400, "'{}' must be a number, got {}", name, v.type_name());
  const double d = v.get<double>();
  if (!(d >= lo && d <= hi)) reject(400, "'{}' must be between {} and {}, got {}", name, lo, hi, d);
  return d;
}

int64_t integer(const BodyJson& body, const char* name, int64_t lo, int64_t hi, int64_t fallback) {
  const BodyJson& v = field(body, name);
  if (v.is_null()) return fallback;
  if (!v.is_number_integer()) reject(400, "'{}' must be an integer, got {}", name, v.type_name());
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(hi))
    reject(400, "'{}' must be between {} and {}, got {}", name, lo, hi, v.get<uint64_t>());
  const int64_t i = v.get<int64_t>();
  if (i < lo || i > hi) reject(400, "'{}' must be between {} and {}, got {}", name, lo, hi, i);
  return i;
}

std::vector<std::string> stop_strings(const BodyJson& body) {
  constexpr size_t kMaxStops = 16;
  const BodyJson& v = field(body, "stop");
  if (v.is_null()) return {};
  if (v.is_string()) return {v.get<std::string>()};
  if (!v.is_array()) reject(400, "'stop' must be a string or an array of strings, got {}", v.type_name());
  if (v.size() > kMaxStops) reject(400, "'stop' has {} strings, at most {}", v.size(), kMaxStops);
  std::vector<std::string> out;
  for (const auto& s : v) {
    if (!s.is_string())
      reject(400, "'stop' must be a string or an array of strings, got an array holding {}", s.type_name());
    out.push_back(s.get<std::string>());
  }
  return out;
}

// OpenAI's content: a string, or an array of parts of which only text is understood here.
std::string message_content(const BodyJson& m, size_t i) {
  const BodyJson& c = field(m, "content");
  if (c.is_null()) return "";
  if (c.is_string()) return c.get<std::string>();
  if (!c.is_array())
    reject(400, "messages[{}].content must be a string or an array of parts, got {}", i, c.type_name());
  std::string text;
  for (const auto& part : c) {
    if (!part.is_object() || field(part, "type") != "text" || !field(part, "text").is_string())
      reject(400, "messages[{}].content: only parts {{\"type\": \"text\", \"text\": ...}} are supported", i);
    text += part["text"].get<std::string>();
  }
  return text;
}

Prompt prompt_item(const BodyJson& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_array()) return parse_tokens(v, "prompt");
  reject(400, "'prompt' must be a string, an array of token ids, or an array of those, got {}", v.type_name());
}

// Chat's logprobs (a boolean) and top_logprobs (0..20, only beside logprobs: true, as OpenAI and
// llama-server refuse it alone).
int32_t chat_top_logprobs(const BodyJson& body) {
  const bool asked = boolean(body, "logprobs", false);
  const int64_t top = integer(body, "top_logprobs", 0, model::kMaxTopLogprobs, -1);
  if (top >= 0 && !asked) reject(400, "'top_logprobs' requires 'logprobs': true");
  return asked ? static_cast<int32_t>(std::max<int64_t>(top, 0)) : -1;
}

}  // namespace

BodyJson parse_body(const std::string& body) {
  // Deeper nesting is no request's: 8 MB of '[' would be millions of nested arrays.
  static constexpr int kMaxDepth = 64;
  // What a parse error quotes of the body (nlohmann's message holds the whole token it last read).
  constexpr size_t kMaxQuote = 200;
  BodyJson j;
  try {
    j = BodyJson::parse(body, [](int depth, BodyJson::parse_event_t, BodyJson&) {
      if (depth > kMaxDepth) reject(400, "the body nests deeper than {} levels", kMaxDepth);
      return true;
    });
  } catch (const BodyJson::parse_error& e) {
    std::string what = e.what();
    if (what.size() > kMaxQuote) what = what.substr(0, kMaxQuote) + "...";
    reject(400, "the body is not valid JSON: {}", what);
  }
  if (!j.is_object()) reject(400, "the body must be a JSON object, got {}", j.type_name());
  return j;
}

std::vector<Token> parse_tokens(const BodyJson& v, const char* name, int32_t n_vocab) {
  if (!v.is_array()) reject(400, "'{}' must be an array of token ids, got {}", name, v.type_name());
  std::vector<Token> out;
  for (const auto& t : v) {
    if (!t.is_number_integer()) reject(400, "'{}' must hold token ids (integers), got {}", name, t.type_name());
    const int64_t id = t.get<int64_t>();
    const int64_t hi = n_vocab > 0 ? n_vocab - 1 : INT32_MAX;
    if (id < 0 || id > hi || (t.is_number_unsigned() && t.get<uint64_t>() > static_cast<uint64_t>(hi)))
      reject(400, "'{}': token id {} is outside the vocabulary (0..{})", name, t.dump(), hi);
    out.push_back(static_cast<Token>(id));
  }
  return out;
}

GenerationParams parse_generation(const BodyJson& body) {
  GenerationParams g;
  const int64_t n = integer(body, "n", 1, 1 << 20, 1);
  if (n != 1) reject(400, "'n' must be 1: one choice per request is supported, got {}", n);
  const char* max_name = field(body, "max_completion_tokens").is_null() ? "max_tokens" : "max_completion_tokens";
  g.max_tokens = static_cast<int32_t>(integer(body, max_name, 0, kMaxTokensLimit, -1));
  auto& s = g.sampling;
  s.temp = static_cast<float>(number(body, "temperature", 0, 100, s.temp));
  s.top_p = static_cast<float>(number(body, "top_p", 0, 1, s.top_p));
  s.min_p = static_cast<float>(number(body, "min_p", 0, 1, s.min_p));
  s.top_k = static_cast<int32_t>(integer(body, "top_k", 0, 1 << 24, s.top_k));
  s.presence_penalty = static_cast<float>(number(body, "presence_penalty", -2, 2, s.presence_penalty));
  s.frequency_penalty = static_cast<float>(number(body, "frequency_penalty", -2, 2, s.frequency_penalty));
  s.repeat_penalty = static_cast<float>(number(body, "repeat_penalty", 0, 100, s.repeat_penalty));
  s.repeat_last_n = static_cast<int32_t>(integer(body, "repeat_last_n", -1, 1 << 20, s.repeat_last_n));
  // A negative seed (llama-server's -1) asks for a random one, like the absent field.
  const int64_t seed = integer(body, "seed", INT64_MIN, INT64_MAX, -1);
  if (seed >= 0) s.seed = static_cast<uint64_t>(seed);
  try {  // what the ranges above let through and the sampler cannot use (a penalty that is 0 as a float)
    model::validate(s);
  } catch (const Error& e) {
    reject(400, "{}", e.message());
  }
  g.stop = stop_strings(body);
  g.grammar = parse_output_constraint(body);
  g.stream = boolean(body, "stream", false);
  const BodyJson& so = field(body, "stream_options");
  if (!so.is_null()) {
    if (!so.is_object()) reject(400, "'stream_options' must be an object, got {}", so.type_name());
    g.include_usage = boolean(so, "include_usage", false);
  }
  return g;
}

std::vector<chat::Message> parse_messages(const BodyJson& body) {
  const BodyJson& v = field(body, "messages");
  if (v.is_null()) reject(400, "'messages' is missing");
  if (!v.is_array()) reject(400, "'messages' must be an array, got {}", v.type_name());
  if (v.empty()) reject(400, "'messages' is empty: at least one message is needed");
  std::vector<chat::Message> out;
  for (size_t i = 0; i < v.size(); ++i) {
    const BodyJson& m = v[i];
    if (!m.is_object()) reject(400, "messages[{}] must be an object, got {}", i, m.type_name());
    const BodyJson& role = field(m, "role");
    if (!role.is_string()) reject(400, "messages[{}].role must be a string", i);
    out.push_back({role.get<std::string>(), message_content(m, i)});
  }
  return out;
}

namespace {

BodyJson template_kwargs(const BodyJson& body) {
  BodyJson kwargs = field(body, "chat_template_kwargs");
  if (!kwargs.is_null() && !kwargs.is_object())
    reject(400, "'chat_template_kwargs' must be a JSON object, got {}", kwargs.type_name());
  const BodyJson& effort = field(body, "reasoning_effort");
  if (!effort.is_null()) {
    if (!effort.is_string()) reject(400, "'reasoning_effort' must be a string");
    // chat_template_kwargs' own reasoning_effort, the more specific, wins.
    if (!kwargs.contains("reasoning_effort")) kwargs["reasoning_effort"] = effort;
  }
  try {
    chat::check_template_kwargs(kwargs);
  } catch (const Error& e) {
    reject(400, "'chat_template_kwargs': {}", e.message());
  }
  return kwargs;
}

}  // namespace

ChatRequest parse_chat_request(const BodyJson& body) {
  ChatRequest r;
  r.messages = parse_messages(body);
  r.gen = parse_generation(body);
  r.gen.top_logprobs = chat_top_logprobs(body);
  r.tools = parse_tool_request(body);
  if (r.tools.any()) r.tools.messages = template_input(body["messages"], r.messages);
  r.gen.parallel_tool_calls = r.tools.parallel_tool_calls;
  r.template_kwargs = template_kwargs(body);
  return r;
}

CompletionRequest parse_completion_request(const BodyJson& body) {
  constexpr size_t kMaxPrompts = 64;
  CompletionRequest r;
  const BodyJson& p = field(body, "prompt");
  if (p.is_null()) reject(400, "'prompt' is missing");
  // An array of strings or of arrays is several prompts; an array of numbers is one prompt.
  if (p.is_array() && !p.empty() && (p[0].is_string() || p[0].is_array())) {
    if (p.size() > kMaxPrompts) reject(400, "'prompt' holds {} prompts, at most {}", p.size(), kMaxPrompts);
    for (const auto& item : p) r.prompts.push_back(prompt_item(item));
  } else {
    r.prompts.push_back(prompt_item(p));
  }
  r.gen = parse_generation(body);
  // The legacy field: how many alternatives per token (OpenAI's limit is 5; llama-server passes
  // any n_probs on, so weft takes up to chat's 20).
  r.gen.top_logprobs = static_cast<int32_t>(integer(body, "logprobs", 0, model::kMaxTopLogprobs, -1));
  return r;
}

}  // namespace weft::serve
