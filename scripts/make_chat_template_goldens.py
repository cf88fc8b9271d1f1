#!/usr/bin/env python3
"""Renders the real chat templates in tests/data/chat_templates/ with Python's jinja2, in the
environment Hugging Face transformers renders chat templates with, and writes what they render
to tests/data/chat_templates/goldens.json: the expected output weft's Jinja engine must match
byte for byte (tests/chat/jinja_golden_test.cpp). Run it again after adding a template or a
conversation; CI reads the goldens and needs no Python jinja2.

transformers' environment (utils/chat_template_utils.py): ImmutableSandboxedEnvironment with
trim_blocks, lstrip_blocks and the loopcontrols extension; tojson = json.dumps with
ensure_ascii=False; raise_exception and strftime_now as globals. strftime_now reads a fixed
time here so that the goldens do not change by the day.

Usage: python3 scripts/make_chat_template_goldens.py   (needs jinja2 >= 3.1)
"""
import datetime
import json
import pathlib

from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

ROOT = pathlib.Path(__file__).resolve().parent.parent
DIR = ROOT / "tests" / "data" / "chat_templates"
NOW = datetime.datetime(2025, 3, 14, 9, 26, 53)

# The BOS and EOS texts of the templates of the families weft runs: their models' tokenizers' (llama.cpp
# passes them as bos_token and eos_token; "" where the model has none). Other templates get
# DEFAULT_TOKENS.
DEFAULT_TOKENS = ("<s>", "</s>")
TOKENS = {
    "meta-llama-Llama-3.1-8B-Instruct": ("<|begin_of_text|>", "<|eot_id|>"),
    "meta-llama-Llama-3.2-3B-Instruct": ("<|begin_of_text|>", "<|eot_id|>"),
    "meta-llama-Llama-3.3-70B-Instruct": ("<|begin_of_text|>", "<|eot_id|>"),
    "Qwen-Qwen3-0.6B": ("", "<|im_end|>"),
    "Qwen-Qwen2.5-7B-Instruct": ("", "<|im_end|>"),
    "openai-gpt-oss-120b": ("<|startoftext|>", "<|return|>"),
    "google-gemma-2-2b-it": ("<bos>", "<eos>"),
    "google-gemma-4-31B-it": ("<bos>", "<eos>"),
    "microsoft-Phi-3.5-mini-instruct": ("<s>", "<|endoftext|>"),
    "mistralai-Mistral-Nemo-Instruct-2407": ("<s>", "</s>"),
    "deepseek-ai-DeepSeek-V3.1": ("<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"),
    "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B": ("<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"),
}

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city",
        "parameters": {
            "type": "object",
            "properties": {
                "location": {"type": "string", "description": "The city, e.g. Paris"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "default": "celsius"},
                "days": {"type": "integer", "description": "How many days ahead"},
            },
            "required": ["location"],
        },
    },
}

SYSTEM = {"role": "system", "content": "You are a helpful assistant."}
CHAT = [
    SYSTEM,
    {"role": "user", "content": "Hello! What is 2 + 2?"},
    {"role": "assistant", "content": "2 + 2 is 4."},
    {"role": "user", "content": "And times three?"},
]
TOOL_CALL = [
    {"role": "user", "content": "What is the weather in Paris?"},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": "call_0001",
                "type": "function",
                "function": {"name": "get_weather", "arguments": {"location": "Paris", "unit": "celsius"}},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call_0001", "name": "get_weather", "content": '{"temperature": 22}'},
]

# (case name, messages, tools or None, add_generation_prompt)
CASES = [
    ("chat", CHAT, None, True),
    ("chat_no_generation_prompt", CHAT + [{"role": "assistant", "content": "12."}], None, False),
    ("no_system", CHAT[1:], None, True),
    ("one_user", [{"role": "user", "content": "  Hi there,\n\tfriend  "}], None, True),
    ("unicode", [SYSTEM, {"role": "user", "content": "Grüße! 你好 — \"quotes\" and 'apostrophes' \\ <tags> 🎉"}], None, True),
    ("tools", [SYSTEM, {"role": "user", "content": "What is the weather in Paris?"}], [WEATHER_TOOL], True),
    ("tool_call", TOOL_CALL, [WEATHER_TOOL], True),
]


def environment():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def raise_exception(message):
        raise RuntimeError(message)

    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: NOW.strftime(fmt)
    return env


def main():
    env = environment()
    out = {"now": [NOW.year, NOW.month, NOW.day, NOW.hour, NOW.minute, NOW.second], "renders": []}
    for path in sorted(DIR.glob("*.jinja")):
        name = path.stem
        bos, eos = TOKENS.get(name, DEFAULT_TOKENS)
        source = path.read_text(encoding="utf-8")
        template = env.from_string(source)
        for case, messages, tools, add_gen in CASES:
            ctx = {"messages": messages, "add_generation_prompt": add_gen, "bos_token": bos, "eos_token": eos}
            if tools is not None:
                ctx["tools"] = tools
            entry = {"template": name, "case": case, **ctx}
            try:
                entry["expected"] = template.render(**ctx)
            except RuntimeError as e:  # raise_exception: the template refuses the conversation
                entry["raises"] = str(e)
            except Exception as e:  # noqa: BLE001 - a Python type error (a generator to tojson, say)
                entry["fails"] = f"{type(e).__name__}: {e}"
            out["renders"].append(entry)
    path = DIR / "goldens.json"
    path.write_text(json.dumps(out, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    n_ok = sum("expected" in r for r in out["renders"])
    print(f"{path.relative_to(ROOT)}: {len(out['renders'])} renders ({n_ok} rendered, the rest raise)")


if __name__ == "__main__":
    main()
