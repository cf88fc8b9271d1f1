// The flags of `weft run` and `weft chat` (llama.cpp's llama-cli names), and the bits of
// terminal output both modes share.
#pragma once

#include "apps/weft/model_options.h"
#include "model/sampling.h"

#include <fmt/format.h>

#include <cstdio>
#include <string>

namespace weft::cli {

struct RunArgs {
  ModelOptions model;
  std::string prompt;       // -p
  std::string prompt_file;  // -f: the prompt from a file (its last newline dropped, as llama.cpp does)
  int n_predict = 128;      // -n; -1: until end of generation or a full context
  bool n_predict_given = false;
  bool prompt_given = false;  // -p, even empty
  model::SamplingParams sampling;
  bool json = false;
  bool profile = false;
  bool escape = true;          // -e / --no-escape: process \n, \t, \xNN ... in the prompt and typed input
  bool display_prompt = true;  // --no-display-prompt
  std::string color = "off";   // -co on|off|auto
  bool verbose = false;        // -v
  bool log_disable = false;    // --log-disable: nothing but errors on stderr
  // Conversation
  bool conversation = false;  // -cnv (weft chat: on)
  bool no_conversation = false;
  bool interactive = false;                       // -i: after the reply, read more input (raw text without -cnv)
  bool single_turn = false;                       // -st
  std::string system_prompt, system_prompt_file;  // -sys, -sysf
  std::string chat_template, chat_template_file;  // --chat-template NAME|TEMPLATE, --chat-template-file
  std::string chat_template_kwargs;               // --chat-template-kwargs JSON
  int parallel = 1;                               // -np: weft run decodes one sequence
  // Constrained decoding (llama.cpp's flags): a GBNF grammar, from a file, or a JSON schema.
  std::string grammar, grammar_file, json_schema;

  bool colored() const;
};

// Informational lines on stderr, as llama.cpp's log: off with --log-disable, more with -v.
class Log {
 public:
  explicit Log(const RunArgs& a) : quiet_(a.log_disable), verbose_(a.verbose && !a.log_disable) {}
  template <typename... Args>
  void info(fmt::format_string<Args...> f, Args&&... args) const {
    if (!quiet_) print(fmt::format(f, std::forward<Args>(args)...));
  }
  template <typename... Args>
  void debug(fmt::format_string<Args...> f, Args&&... args) const {
    if (verbose_) print(fmt::format(f, std::forward<Args>(args)...));
  }
  bool verbose() const { return verbose_; }

 private:
  static void print(const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); }
  bool quiet_, verbose_;
};

// llama.cpp's console colors: the prompt yellow, the user's input bold green, replies plain.
namespace color {
inline constexpr const char* kPrompt = "\x1b[33m";
inline constexpr const char* kUserInput = "\x1b[1m\x1b[32m";
inline constexpr const char* kReset = "\x1b[0m";
}  // namespace color

// Writes to stdout at once (replies are streamed piece by piece).
void write_out(std::string_view s);
// A prompt or template file (-f, -sysf, --chat-template-file): its text without the one newline
// that ends it, as llama.cpp reads them. `flag` names the flag in the error.
std::string read_text_file(const std::string& path, const char* flag);

}  // namespace weft::cli
