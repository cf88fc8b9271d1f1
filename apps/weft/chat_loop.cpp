#include "apps/weft/chat_loop.h"

#include "apps/weft/llama_args.h"
#include "apps/weft/terminal.h"
#include "chat/chat_session.h"
#include "core/error.h"
#include "runtime/turn.h"

#include <functional>
#include <random>
#include <utility>

namespace weft::cli {
namespace {

// A reply on the engine, streamed to stdout; Ctrl-C stops it.
runtime::TurnResult reply(runtime::Engine& engine, const tokenizer::Tokenizer& tok, const std::vector<Token>& seq,
                          int32_t keep, const std::function<void(Token)>& accept, int n_predict, const RunArgs& a,
                          std::mt19937_64& rng) {
  terminal::begin_reply();
  const runtime::TurnResult r = runtime::run_turn(engine, tok, seq, keep, n_predict, a.sampling, rng,
                                                  {accept, write_out, terminal::stop_requested});
  terminal::end_reply();
  return r;
}

// "> " and the user's line (bold green with --color, as llama.cpp shows it); nullopt at the end.
std::optional<std::string> prompt_user(const RunArgs& a) {
  write_out("\n> ");
  if (a.colored()) write_out(color::kUserInput);
  std::optional<std::string> line = terminal::read_line();
  if (a.colored()) write_out(color::kReset);
  if (!line) write_out("\n");
  return line;
}

void report(const Log& log, const runtime::TurnResult& r, int n_ctx) {
  if (r.stop == runtime::StopReason::ContextFull)
    log.info("weft: context full (-c {}): the reply stopped there; /clear starts over", n_ctx);
  log.debug("[{} prompt tokens fed, {} drawn in {:.3f} s ({:.1f} t/s){}]", r.n_fed, r.n_drawn, r.seconds,
            r.seconds > 0 ? r.n_drawn / r.seconds : 0.0, r.interrupted ? ", stopped by Ctrl-C" : "");
}

}  // namespace

chat::Template chat_template(const RunArgs& a, const gguf::File& file, const tokenizer::Tokenizer& tok) {
  const Log log(a);
  const std::string named =
      a.chat_template_file.empty() ? a.chat_template : read_text_file(a.chat_template_file, "--chat-template-file");
  chat::Template tmpl = chat::Template::resolve(file, named, chat::SpecialTokens::of(tok));
  if (!a.chat_template_kwargs.empty()) tmpl.set_kwargs(chat::parse_template_kwargs(a.chat_template_kwargs));
  if (tmpl.fell_back())
    log.info("weft: the model has no chat template (tokenizer.chat_template); using chatml, as llama.cpp does");
  else if (tmpl.is_jinja())
    log.info("chat template: {}, on the Jinja engine (fallback: {})", named.empty() ? "the model's" : "--chat-template",
             tmpl.family() ? chat::family_name(*tmpl.family()) : "none");
  else
    log.info("chat template: {} ({})", tmpl.name(), named.empty() ? "the model's" : "--chat-template");
  return tmpl;
}

int run_conversation(const RunArgs& a, const chat::Template& tmpl, runtime::Engine& engine,
                     const tokenizer::Tokenizer& tok) {
  const Log log(a);
  log.info("chat: /exit or Ctrl-D quits, /clear starts over, /regen redoes the last reply, Ctrl-C stops a reply");
  chat::Session s(tmpl, tok);
  const std::string system =
      a.system_prompt_file.empty() ? a.system_prompt : read_text_file(a.system_prompt_file, "--system-prompt-file");
  if (!system.empty()) s.add({"system", system}, false);  // fed with the first message

  terminal::install_interrupt_handler();
  std::mt19937_64 rng(runtime::resolve_seed(a.sampling.seed));
  // A reply runs to its end of turn unless -n says otherwise (llama.cpp's -n -1).
  const int n_predict = a.n_predict_given ? a.n_predict : -1;
  std::optional<std::string> first;
  if (!a.prompt.empty()) first = a.prompt;  // -p: the first message, already unescaped
  for (int turns = 0; !(a.single_turn && turns > 0); ++turns) {
    std::string text;
    if (first) {
      text = *std::exchange(first, std::nullopt);
      if (a.display_prompt) write_out("> " + text + "\n");
    } else {
      std::optional<std::string> line = prompt_user(a);
      if (!line) return terminal::exit_requested() ? 130 : 0;
      text = a.escape ? process_escapes(*line) : *line;
    }
    if (text == "/exit") return 0;
    if (text == "/clear") {
      s.clear();
      log.info("(conversation cleared)");
      continue;
    }
    std::optional<int32_t> keep = text == "/regen" ? s.regenerate() : s.add({"user", text});
    if (!keep) {
      log.info("(no reply to regenerate)");
      continue;
    }
    if (s.tokens().size() >= static_cast<size_t>(engine.n_ctx())) {
      if (text != "/regen") s.undo();
      log.info("weft: the conversation no longer fits the context (-c {}); /clear starts over", engine.n_ctx());
      continue;
    }
    const runtime::TurnResult r = reply(
        engine, tok, s.tokens(), *keep, [&](Token t) { s.add_generated(t); }, n_predict, a, rng);
    s.end_reply();
    write_out("\n");
    report(log, r, engine.n_ctx());
    if (terminal::exit_requested()) return 130;
  }
  return 0;
}

int run_interactive_text(const RunArgs& a, runtime::Engine& engine, const tokenizer::Tokenizer& tok) {
  const Log log(a);
  log.info(
      "interactive: each line you type is appended to the text; /exit or Ctrl-D quits, Ctrl-C stops the "
      "generation");
  terminal::install_interrupt_handler();
  std::mt19937_64 rng(runtime::resolve_seed(a.sampling.seed));
  std::vector<Token> seq = tok.encode(a.prompt, true, true);
  const int n_predict = a.n_predict_given ? a.n_predict : -1;
  if (a.display_prompt) write_out(a.colored() ? color::kPrompt + a.prompt + color::kReset : a.prompt);
  for (;;) {
    if (seq.size() >= static_cast<size_t>(engine.n_ctx())) {
      log.info("weft: context full (-c {})", engine.n_ctx());
      return 0;
    }
    if (!seq.empty()) {
      const runtime::TurnResult r = reply(
          engine, tok, seq, static_cast<int32_t>(seq.size()), [&](Token t) { seq.push_back(t); }, n_predict, a, rng);
      report(log, r, engine.n_ctx());
      if (terminal::exit_requested()) return 130;
    }
    std::optional<std::string> line = prompt_user(a);
    if (!line) return terminal::exit_requested() ? 130 : 0;
    if (*line == "/exit") return 0;
    // Typed text is text: special-token names in it stay words (llama.cpp: parse_special off).
    const std::vector<Token> more = tok.encode((a.escape ? process_escapes(*line) : *line) + "\n", false, false);
    seq.insert(seq.end(), more.begin(), more.end());
  }
}

}  // namespace weft::cli
