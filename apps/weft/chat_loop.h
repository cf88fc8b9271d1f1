// `weft run -cnv` / `weft chat` and `weft run -i`: the interactive modes, over any device mix
// (runtime::Engine's single sequence; each turn feeds only what the cache does not hold yet).
#pragma once

#include "apps/weft/run_args.h"
#include "chat/chat_template.h"
#include "runtime/engine.h"
#include "tokenizer/tokenizer.h"

namespace weft::cli {

// The conversation's template: --chat-template(-file), else the model's (chatml when it has none,
// said on stderr); template text runs on the Jinja engine with `tok`'s BOS and EOS. Throws naming
// --chat-template when it is not one weft can render.
chat::Template chat_template(const RunArgs& a, const gguf::File& file, const tokenizer::Tokenizer& tok);
// Conversation with `tmpl`: -sys, -p as the first message, /exit /clear /regen, Ctrl-C. Returns
// the exit code (130 after a Ctrl-C exit).
int run_conversation(const RunArgs& a, const chat::Template& tmpl, runtime::Engine& engine,
                     const tokenizer::Tokenizer& tok);
// -i without a template: the prompt, then each typed line appended as text.
int run_interactive_text(const RunArgs& a, runtime::Engine& engine, const tokenizer::Tokenizer& tok);

}  // namespace weft::cli
