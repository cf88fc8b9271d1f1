// weft run: generate text, streamed to stdout (prompt + generation); timings to stderr. With -cnv
// (or as `weft chat`) a conversation with the model's chat template, with -i an interactive text.
#include "apps/weft/chat_loop.h"
#include "apps/weft/commands.h"
#include "apps/weft/device_report.h"
#include "apps/weft/llama_args.h"
#include "apps/weft/run_args.h"
#include "chat/chat_template.h"
#include "core/error.h"
#include "core/progress.h"
#include "kernels/cpu_features.h"
#include "model/grammar.h"
#include "model/json_schema_grammar.h"
#include "model/sampling.h"
#include "runtime/generate.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <climits>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <memory>
#include <optional>

namespace weft::cli {
namespace {

// The load's line: its time, the devices and split, and the kernels this process runs.
void log_load(const Log& log, const runtime::Engine& engine, double load_s) {
  log.info("load: {:.3f} s | {} devices, split {} | kernels {}", load_s, engine.devices().size(),
           parallel::split_mode_name(engine.plan().mode), kernels::kernel_summary());
}

void print_json(const RunArgs& a, const runtime::GenerateResult& r, const runtime::Engine& engine, double load_s,
                double pp, double tg) {
  nlohmann::json j;
  j["prompt"] = a.prompt;
  j["prompt_ids"] = r.prompt;
  j["generated_ids"] = r.generated;
  j["text"] = r.text;
  j["timings"] = {{"load_s", load_s},
                  {"prompt_s", r.prompt_seconds},
                  {"prompt_tokens_per_s", pp},
                  {"gen_s", r.gen_seconds},
                  {"gen_tokens_per_s", tg}};
  j["stop"] = runtime::stop_reason_name(r.stop);
  j["split_mode"] = parallel::split_mode_name(engine.plan().mode);
  j["devices"] = static_cast<int>(engine.devices().size());
  // A piece may end mid UTF-8 sequence (byte tokens): replace invalid bytes rather than fail.
  std::puts(j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
}

// --grammar, --grammar-file or --json-schema as a parsed grammar (null: none given); its errors
// name the position or the schema's part.
std::shared_ptr<const model::Grammar> grammar_of(const RunArgs& a) {
  if (!a.json_schema.empty()) return model::Grammar::parse(model::json_schema_to_grammar(a.json_schema));
  if (!a.grammar_file.empty()) {
    std::ifstream in(a.grammar_file, std::ios::binary);
    if (!in) fail("cli", "--grammar-file: cannot read {}", a.grammar_file);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    return model::Grammar::parse(text);
  }
  if (!a.grammar.empty()) return model::Grammar::parse(a.grammar);
  return nullptr;
}

// One generation from the prompt.
int generate_once(const RunArgs& a, runtime::Engine& engine, const tokenizer::Tokenizer& tok, double load_s) {
  const Log log(a);
  const auto prompt = tok.encode(a.prompt, /*add_special=*/true, /*parse_special=*/true);
  log.debug("prompt: {} tokens: [{}]", prompt.size(), fmt::join(prompt, ", "));
  if (!a.json && a.display_prompt) write_out(a.colored() ? color::kPrompt + a.prompt + color::kReset : a.prompt);
  const int n_predict = a.n_predict < 0 ? INT_MAX : a.n_predict;  // -1: until the end of generation or context
  auto r = runtime::generate(
      engine, &tok, prompt, n_predict, a.sampling,
      [&](const std::string& piece) {
        if (!a.json) write_out(piece);
      },
      grammar_of(a));
  const double pp = r.prompt_seconds > 0 ? prompt.size() / r.prompt_seconds : 0;
  const size_t n_decode = r.generated.size() > 1 ? r.generated.size() - 1 : 0;
  const double tg = r.gen_seconds > 0 ? n_decode / r.gen_seconds : 0;
  if (a.json) print_json(a, r, engine, load_s, pp, tg);
  std::fflush(stdout);
  if (!a.json && !a.log_disable) std::fputc('\n', stderr);  // stdout holds exactly prompt + generation
  log_load(log, engine, load_s);
  log.info("prompt: {} tokens in {:.3f} s ({:.2f} t/s)", prompt.size(), r.prompt_seconds, pp);
  log.info("generation: {} tokens, {} decode steps in {:.3f} s ({:.2f} t/s)", r.generated.size(), n_decode,
           r.gen_seconds, tg);
  if (r.stop == runtime::StopReason::ContextFull) {  // as llama.cpp does: never stop short silently
    if (a.n_predict < 0)
      log.info("weft: context full (-c {}): stopped after {} tokens", engine.n_ctx(), r.generated.size());
    else
      log.info("weft: context full (-c {}): stopped after {} of the {} tokens asked for (-n)", engine.n_ctx(),
               r.generated.size(), a.n_predict);
  }
  if (a.profile) print_device_report(engine, true);
  return 0;
}

// The prompt from -p or -f, escapes processed (llama.cpp's -e, on by default); flag combinations
// that cannot work are refused before the model loads.
void settle(RunArgs& a, bool chat_command) {
  if (!a.prompt_file.empty()) a.prompt = read_text_file(a.prompt_file, "-f");
  if (a.escape) a.prompt = process_escapes(a.prompt);
  if (chat_command) a.conversation = true;
  if (a.no_conversation) a.conversation = false;
  if (a.conversation) a.interactive = true;
  if (a.json && a.interactive) fail("cli", "--json prints one generation; it does not go with -cnv or -i");
  if (a.interactive && (!a.grammar.empty() || !a.grammar_file.empty() || !a.json_schema.empty()))
    fail("cli", "--grammar, --grammar-file and --json-schema constrain one generation; not with -cnv or -i");
  if (!a.interactive && !a.prompt_given && a.prompt_file.empty())
    fail("cli", "no prompt: give one with -p or -f, or talk to the model with -cnv (weft chat) or -i");
  model::validate(a.sampling);
}

void note_ignored(const RunArgs& a) {
  const Log log(a);
  if (a.parallel != 1) log.info("weft: note: -np {}: weft run decodes one sequence (-np is for serving)", a.parallel);
  if (!a.conversation) {
    if (!a.system_prompt.empty() || !a.system_prompt_file.empty()) log.info("weft: note: -sys applies to -cnv only");
    if (!a.chat_template.empty() || !a.chat_template_file.empty() || !a.chat_template_kwargs.empty())
      log.info("weft: note: --chat-template and its kwargs apply to -cnv only");
  }
}

int run(RunArgs& a, bool chat_command) {
  settle(a, chat_command);
  a.log_disable = a.log_disable || log_disabled();  // main() takes --log-disable for every command
  a.model.quiet = a.log_disable;
  note_ignored(a);
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  auto file = gguf::File::open(a.model.model);
  auto tok = tokenizer::Tokenizer::from_gguf(*file);
  // Before the load: a template weft cannot render is an error that should not wait for it.
  const std::optional<chat::Template> tmpl =
      a.conversation ? std::optional<chat::Template>(chat_template(a, *file, *tok)) : std::nullopt;
  runtime::EngineOptions eo = a.model.engine_options();
  if (!a.interactive) eo.ctx_checkpoints = 0;  // one prompt has no next turn to keep a state for
  runtime::Engine engine(*file, eo);
  a.model.lock_memory();
  const double load_s = std::chrono::duration<double>(Clock::now() - t0).count();
  if (tmpl) {
    log_load(Log(a), engine, load_s);
    return run_conversation(a, *tmpl, engine, *tok);
  }
  if (a.interactive) return run_interactive_text(a, engine, *tok);
  return generate_once(a, engine, *tok, load_s);
}

void add_flags(CLI::App& cmd, RunArgs& a) {
  a.model.add_to(cmd);
  cmd.add_option("-p,--prompt", a.prompt, "prompt text (with -cnv: the first message)");
  cmd.add_option("-f,--file", a.prompt_file, "a file holding the prompt")->excludes("--prompt");
  cmd.add_option("-n,--n-predict,--predict", a.n_predict,
                 "tokens to generate (-1: until the end of generation or a full context; chat: each reply, default "
                 "-1)")
      ->check(CLI::Range(-1, 1 << 20));
  auto& s = a.sampling;
  cmd.add_option("--temp,--temperature", s.temp, "temperature (0: greedy)")->check(number_range(0.0, 100.0));
  cmd.add_option("--seed,-s", s.seed, "RNG seed (default: random)");
  cmd.add_option("--top-k", s.top_k, "top-k (0: off)")->check(CLI::Range(0, 1 << 24));
  cmd.add_option("--top-p", s.top_p, "top-p (1: off)")->check(number_range(0.0, 1.0));
  cmd.add_option("--min-p", s.min_p, "min-p (0: off)")->check(number_range(0.0, 1.0));
  cmd.add_option("--repeat-penalty", s.repeat_penalty, "repetition penalty (1: off)")
      ->check(number_range(model::kMinRepeatPenalty, 100.0));
  cmd.add_option("--repeat-last-n", s.repeat_last_n, "tokens the penalty looks back")->check(CLI::Range(0, 1 << 20));
  cmd.add_flag("--json", a.json, "print one JSON object (ids, text, timings) instead of the text");
  cmd.add_flag("--profile", a.profile, "print time per op kind and collective wait per device");
  cmd.add_flag("-e,--escape,!--no-escape", a.escape, "process \\n \\t \\xNN ... in the prompt and input (default on)");
  cmd.add_flag("--display-prompt,!--no-display-prompt", a.display_prompt, "print the prompt (default on)");
  cmd.add_option("--color", a.color, "(-co) [on|off|auto]: prompt yellow, your input green (default off)")
      ->expected(0, 1)
      ->check(CLI::IsMember({"", "on", "off", "auto"}));
  cmd.add_flag("-v,--verbose,--log-verbose", a.verbose, "more on stderr: prompt tokens, per-reply speed");
  cmd.add_flag("--log-disable", a.log_disable, "nothing on stderr but errors");
  cmd.add_flag("--conversation", a.conversation, "(-cnv) chat with the model's chat template (weft chat)");
  cmd.add_flag("--no-conversation", a.no_conversation, "(-no-cnv) no chat, even as weft chat");
  cmd.add_flag("-i,--interactive", a.interactive, "after the generation, read more input (text without -cnv)");
  cmd.add_flag("--single-turn", a.single_turn, "(-st) one reply, then exit");
  cmd.add_option("--system-prompt", a.system_prompt, "(-sys) the chat's system message");
  cmd.add_option("--system-prompt-file", a.system_prompt_file, "(-sysf) a file holding the system message")
      ->excludes("--system-prompt");
  cmd.add_option("--chat-template", a.chat_template,
                 "chat template by name or template text (default: the model's): " + chat::template_names());
  cmd.add_option("--chat-template-file", a.chat_template_file, "a file holding the chat template")
      ->excludes("--chat-template");
  add_chat_template_kwargs(cmd, a.chat_template_kwargs);
  cmd.add_option("--grammar", a.grammar, "a GBNF grammar the output must follow (llama.cpp's format)");
  cmd.add_option("--grammar-file", a.grammar_file, "a file holding the GBNF grammar")->excludes("--grammar");
  cmd.add_option("-j,--json-schema", a.json_schema, "a JSON schema the output must follow")
      ->excludes("--grammar")
      ->excludes("--grammar-file");
  cmd.add_option("--parallel", a.parallel, "(-np) llama.cpp's parallel sequences; weft run decodes one")
      ->check(CLI::Range(1, 1024));
}

Action add_command(CLI::App& app, const char* name, const char* what, bool chat_command) {
  auto a = std::make_shared<RunArgs>();
  auto* cmd = app.add_subcommand(name, what);
  add_flags(*cmd, *a);
  return [a, cmd, chat_command] {
    a->n_predict_given = cmd->get_option("--n-predict")->count() > 0;
    a->prompt_given = cmd->get_option("--prompt")->count() > 0;  // -p '' is an empty prompt
    return run(*a, chat_command);
  };
}

}  // namespace

Action add_run(CLI::App& app) {
  return add_command(app, "run", "generate text from a prompt (-cnv: chat, -i: interactive)", false);
}

Action add_chat(CLI::App& app) {
  return add_command(app, "chat", "chat with a model on the terminal (weft run -cnv)", true);
}

}  // namespace weft::cli
