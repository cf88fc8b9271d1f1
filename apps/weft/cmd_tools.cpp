// weft info | tokenize | gen-model: file tools that need no devices (info --devices lists them).
#include "apps/weft/commands.h"
#include "chat/chat_template.h"
#include "core/error.h"
#include "device/device_kind.h"
#include "gguf/gguf_info.h"
#include "model/model_config.h"
#include "tokenizer/tokenizer.h"
#include "tools/gen_model.h"

#include <cstdio>
#include <memory>

namespace weft::cli {
namespace {

// The ChatML template as models ship it in tokenizer_config.json (OpenHermes 2.5, Qwen ...).
constexpr std::string_view kChatMlJinja =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + "
    "'\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

}  // namespace

Action add_info(CLI::App& app) {
  struct Args {
    std::string path;
    bool all = false, devices = false;
  };
  auto a = std::make_shared<Args>();
  auto* cmd = app.add_subcommand("info", "print a GGUF file's metadata and tensor table, or this machine's devices");
  auto* file = cmd->add_option("file", a->path, "GGUF file");
  cmd->add_flag("--all", a->all, "print long strings and arrays in full");
  cmd->add_flag("--devices", a->devices, "list the devices this machine offers, by kind (what --devices can name)")
      ->excludes(file);
  return [a] {
    if (a->devices) {
      for (const auto& kind : device::device_kinds()) std::fputs(kind.list_local().c_str(), stdout);
      return 0;
    }
    if (a->path.empty()) fail("cli", "info: name a GGUF file, or --devices");
    auto f = gguf::File::open(a->path);
    std::fputs(gguf::describe(*f, a->all).c_str(), stdout);
    return 0;
  };
}

Action add_tokenize(CLI::App& app) {
  struct Args {
    std::string model, prompt;
    bool no_bos = false;
  };
  auto a = std::make_shared<Args>();
  auto* cmd = app.add_subcommand("tokenize", "print the token ids of a text (like llama-tokenize --ids)");
  cmd->add_option("-m,--model", a->model, "GGUF model or vocab file")->required();
  cmd->add_option("-p,--prompt", a->prompt, "text")->required();
  cmd->add_flag("--no-bos", a->no_bos, "do not add BOS/EOS tokens");
  return [a] {
    auto f = gguf::File::open(a->model);
    auto tok = tokenizer::Tokenizer::from_gguf(*f);
    const auto ids = tok->encode(a->prompt, !a->no_bos, true);
    std::string out = "[";
    for (size_t i = 0; i < ids.size(); ++i) out += (i ? ", " : "") + std::to_string(ids[i]);
    std::puts((out + "]").c_str());
    return 0;
  };
}

Action add_gen_model(CLI::App& app) {
  auto o = std::make_shared<tools::GenModelOptions>();
  auto* cmd = app.add_subcommand("gen-model", "write a deterministic random-weight model (no download needed)");
  cmd->add_option("-o,--output", o->path, "output GGUF file")->required();
  cmd->add_option("--preset", o->preset,
                  "tiny | 500m | 1b | 8b-shape | gemma3-1b | tiny-moe | moe-2b | gpt-oss-mini | gemma4-a4b-mini | "
                  "gemma4-e2b-mini | deepseek-mini (deepseek2; tiny-moe takes its own tiny shape there) | qwen35-mini "
                  "(qwen35; tiny takes its own tiny shape there) | qwen35moe-mini (qwen35moe; so does tiny-moe) | "
                  "qwen3next-mini (qwen3next; so does tiny-moe)");
  cmd->add_option("--type", o->type,
                  "f32 f16 bf16 q8_0 q4_0 q4_1 q5_0 q5_1 q2_k q3_k q4_k q5_k q6_k q4_k_m q5_k_m iq4_nl iq4_xs "
                  "mxfp4 (MoE: the experts in mxfp4, the rest q8_0)");
  cmd->add_option("--arch", o->arch,
                  "llama | qwen2 | qwen3 | gemma3 | gemma4 | phi3 | qwen35 (Qwen 3.5: Gated DeltaNet and gated "
                  "attention); MoE presets: llama (Mixtral) | qwen2moe | qwen3moe | gpt-oss | gemma4 | deepseek2 "
                  "(DeepSeek V3: latent attention, grouped sigmoid routing) | qwen35moe (Qwen 3.5 with experts) | "
                  "qwen3next (Qwen3-Next)");
  cmd->add_option("--sliding-window", o->sliding_window,
                  "gemma3, gemma4: the local layers' window (default 512, or ctx/8)");
  cmd->add_option("--rope-scaling", o->rope_scaling,
                  "yarn: YaRN context extension (Qwen's long-context files; deepseek2: V3's, with its log multiplier)");
  cmd->add_option("--rope-scale", o->rope_factor, "the YaRN factor (default 4)");
  cmd->add_option("--yarn-orig-ctx", o->yarn_orig_ctx, "YaRN's original context (default ctx/4)");
  cmd->add_option("--seed", o->seed, "weights seed");
  cmd->add_flag("--tied", o->tied, "tied embeddings (no output.weight)");
  cmd->add_flag("--fused-qkvz", o->fused_qkvz, "qwen3next: its older files' layout (q, k, v and z in one ssm_in)");
  cmd->add_option("--ctx", o->n_ctx, "context length written to the file");
  cmd->add_option("--n-embd", o->overrides.n_embd, "override the preset's embedding width");
  cmd->add_option("--n-layer", o->overrides.n_layer, "override the preset's layer count");
  cmd->add_option("--n-ff", o->overrides.n_ff, "override the preset's FFN width");
  cmd->add_option("--n-head", o->overrides.n_head, "override the preset's head count");
  cmd->add_option("--n-head-kv", o->overrides.n_head_kv, "override the preset's KV head count");
  cmd->add_option("--head-dim", o->overrides.head_dim, "override the preset's head size (default n_embd / n_head)");
  cmd->add_option("--head-dim-swa", o->overrides.head_dim_swa,
                  "gemma4: the sliding-window layers' head size (default --head-dim's)");
  cmd->add_option("--n-head-kv-swa", o->overrides.n_head_kv_swa,
                  "gemma4: the sliding-window layers' KV heads (default --n-head-kv's)");
  cmd->add_option("--n-embd-per-layer", o->overrides.n_embd_per_layer,
                  "gemma4: each layer's input width from per-layer token embeddings (E2B/E4B: 256)");
  cmd->add_option("--shared-kv-layers", o->overrides.n_kv_shared,
                  "gemma4: the last layers attending over an earlier layer's KV cache, their FFN twice as wide (E2B)");
  cmd->add_option("--n-vocab", o->overrides.n_vocab, "override the preset's vocabulary size");
  cmd->add_option("--n-expert", o->overrides.n_expert, "override the MoE preset's expert count");
  cmd->add_option("--n-expert-used", o->overrides.n_expert_used, "override the MoE preset's experts per token");
  cmd->add_option("--n-ff-exp", o->overrides.n_ff_exp, "override the MoE preset's expert FFN width");
  cmd->add_option_function<int64_t>(
         "--q-lora-rank", [o](int64_t r) { o->overrides.q_lora_rank = r == 0 ? -1 : r; },
         "deepseek2: the query's low-rank width; 0: none, q straight from the embedding (attn_q, as DeepSeek-V2-Lite)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--kv-lora-rank", o->overrides.kv_lora_rank, "deepseek2: the width of the keys' and values' latent");
  cmd->add_option("--n-rot", o->overrides.n_rot,
                  "qwen35, qwen35moe, qwen3next: the features of each head RoPE turns (default a quarter of the head)");
  cmd->add_option(
      "--full-attn-interval", o->overrides.full_attn_interval,
      "qwen35, qwen35moe, qwen3next: every Nth layer full attention, the others Gated DeltaNet (default 4)");
  cmd->add_option("--linear-k-heads", o->overrides.lin_k_heads,
                  "qwen35, qwen35moe, qwen3next: the linear layers' key heads");
  cmd->add_option("--linear-v-heads", o->overrides.lin_v_heads,
                  "qwen35, qwen35moe, qwen3next: the linear layers' value heads (a multiple of the key heads)");
  cmd->add_option("--linear-head-dim", o->overrides.lin_head_dim,
                  "qwen35, qwen35moe, qwen3next: the linear layers' key and value head size");
  cmd->add_option("--split-max-tensors", o->split_max_tensors,
                  "write a split model, at most N tensors per part (as llama-gguf-split): "
                  "<output without .gguf>-00001-of-0000K.gguf ...")
      ->check(CLI::PositiveNumber);
  auto chat_template = std::make_shared<std::string>();
  cmd->add_option("--chat-template", *chat_template,
                  "write a chat template, by name (chatml, llama3, ...) or as template text; its special tokens "
                  "take the last ids of the vocabulary");
  return [o, chat_template] {
    if (!chat_template->empty()) {
      const chat::Template t = chat::Template::from_string(*chat_template);
      // chatml as its usual Jinja text, so llama.cpp's Jinja engine reads it too; other names are
      // written as names, which llama.cpp's built-in templates (--no-jinja) and weft recognise.
      o->chat_template = t.family() == chat::Family::ChatML && chat::family_from_name(*chat_template)
                             ? std::string(kChatMlJinja)
                             : *chat_template;
      for (std::string_view m : t.markers()) o->control_tokens.emplace_back(m);
    }
    for (const std::string& path : tools::generate_model(*o)) std::fprintf(stderr, "wrote %s\n", path.c_str());
    return 0;
  };
}

}  // namespace weft::cli
