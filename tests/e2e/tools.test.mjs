// Tool calling through the official openai client, on the generated model served with Qwen3's own
// chat template (--chat-template-file): a conversation holding a call and its result (the client's
// half of a round trip) rendered and answered, whole and streamed, the stream's content and
// reasoning adding up to the whole reply's; bad tools refused with a 400 naming why. The tiny
// model writes random text, so it calls a tool only when forced (tool_choice "required": the
// grammar makes its text a call whose arguments follow the tool's schema): the whole round trip.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import OpenAI from "openai";

import { client, postJson } from "./lib/servers.mjs";

const kTestTimeoutMs = 60_000;
const weather = {
  type: "function",
  function: {
    name: "get_weather",
    description: "The weather now in a city",
    parameters: { type: "object", properties: { location: { type: "string" } }, required: ["location"] },
  },
};
const roundTrip = [
  { role: "user", content: "What is the weather in Paris?" },
  {
    role: "assistant",
    content: null,
    tool_calls: [{ id: "call_1", type: "function", function: { name: "get_weather", arguments: '{"location":"Paris"}' } }],
  },
  { role: "tool", tool_call_id: "call_1", content: '{"temperature": 22}' },
];

describe("tools on a Jinja template", { timeout: kTestTimeoutMs }, () => {
  const url = process.env.WEFT_E2E_TOOLS_URL;
  if (!url) throw new Error("WEFT_E2E_TOOLS_URL is not set: run the end-to-end tests through scripts/e2e.sh");
  const openai = client(url);
  const greedy = { model: "gen", temperature: 0, max_tokens: 16, tools: [weather] };

  test("a tool result answered, whole and streamed alike", async () => {
    const whole = await openai.chat.completions.create({ ...greedy, messages: roundTrip });
    const choice = whole.choices[0];
    assert.equal(choice.message.role, "assistant");
    assert.ok(["stop", "length", "tool_calls"].includes(choice.finish_reason), choice.finish_reason);
    // tool_choice "none": the same conversation without the tools' schema in the prompt.
    const plain = await openai.chat.completions.create({ ...greedy, messages: roundTrip, tool_choice: "none" });
    assert.ok(
      whole.usage.prompt_tokens > plain.usage.prompt_tokens + 50,
      `the tool schema is in the prompt: ${whole.usage.prompt_tokens} vs ${plain.usage.prompt_tokens} tokens`,
    );

    const stream = await openai.chat.completions.create({ ...greedy, messages: roundTrip, stream: true });
    let content = "";
    let reasoning = "";
    let finish = null;
    for await (const chunk of stream) {
      for (const c of chunk.choices) {
        if (c.delta.content) content += c.delta.content;
        if (c.delta.reasoning_content) reasoning += c.delta.reasoning_content;
        if (c.finish_reason) finish = c.finish_reason;
      }
    }
    assert.equal(content, choice.message.content ?? "");
    assert.equal(reasoning, choice.message.reasoning_content ?? "");
    assert.equal(finish, choice.finish_reason);
  });

  test("/apply-template renders the call and its result as Qwen3's template does", async () => {
    const { prompt } = await postJson(url, "/apply-template", { messages: roundTrip, tools: [weather] });
    assert.ok(prompt.includes('"name": "get_weather"'), prompt);  // the tool's schema
    assert.ok(
      prompt.includes('<tool_call>\n{"name": "get_weather", "arguments": {"location": "Paris"}}\n</tool_call>'),
      prompt,
    );
    assert.ok(prompt.includes('<tool_response>\n{"temperature": 22}\n</tool_response>'), prompt);
    assert.ok(prompt.endsWith("<|im_start|>assistant\n"), prompt);
  });

  test("log-probabilities of a split stream: every token's, as in the whole reply", async () => {
    const asked = { ...greedy, messages: roundTrip, logprobs: true, top_logprobs: 2 };
    const whole = await openai.chat.completions.create(asked);
    const stream = await openai.chat.completions.create({ ...asked, stream: true });
    const tokens = [];
    for await (const chunk of stream)
      for (const c of chunk.choices) if (c.logprobs?.content) tokens.push(...c.logprobs.content.map((t) => t.token));
    assert.ok(tokens.length > 0);
    assert.deepEqual(
      tokens,
      whole.choices[0].logprobs.content.map((t) => t.token),
    );
  });

  test("a forced call, whole and streamed, and its result answered", async () => {
    const ask = {
      model: "gen",
      temperature: 0.8,
      seed: 5,
      max_tokens: 400,
      tools: [weather],
      tool_choice: "required",
      parallel_tool_calls: false,
      messages: roundTrip.slice(0, 1),
    };
    const call = await openai.chat.completions.create(ask);
    assert.equal(call.choices[0].finish_reason, "tool_calls");
    const calls = call.choices[0].message.tool_calls;
    assert.equal(calls.length, 1);
    assert.equal(calls[0].function.name, "get_weather");
    assert.equal(typeof JSON.parse(calls[0].function.arguments).location, "string");

    const stream = await openai.chat.completions.create({ ...ask, stream: true });
    let name = "";
    let args = "";
    let finish = null;
    for await (const chunk of stream) {
      for (const c of chunk.choices) {
        for (const t of c.delta.tool_calls ?? []) {
          name += t.function?.name ?? "";
          args += t.function?.arguments ?? "";
        }
        if (c.finish_reason) finish = c.finish_reason;
      }
    }
    assert.equal(name, "get_weather");
    assert.equal(typeof JSON.parse(args).location, "string");
    assert.equal(finish, "tool_calls");

    const result = { role: "tool", tool_call_id: calls[0].id, content: '{"temperature": 22}' };
    const answer = await openai.chat.completions.create({
      ...greedy,
      messages: [...ask.messages, call.choices[0].message, result],
    });
    assert.ok(["stop", "length", "tool_calls"].includes(answer.choices[0].finish_reason));
    assert.ok(answer.usage.prompt_tokens > call.usage.prompt_tokens, "the call and its result are in the prompt");
  });

  test("bad tools are 400s naming why", async () => {
    const refused = async (fields, message) => {
      await assert.rejects(
        openai.chat.completions.create({ ...greedy, messages: roundTrip.slice(0, 1), ...fields }),
        (e) => e instanceof OpenAI.BadRequestError && e.message.includes(message),
      );
    };
    await refused({ tools: [{ type: "function", function: { name: "" } }] }, "tools[0].function.name");
    await refused({ tool_choice: { type: "function", function: { name: "nope" } } }, "not in 'tools'");
    const bad = structuredClone(roundTrip);
    bad[1].tool_calls[0].function.arguments = "{";
    await refused({ messages: bad }, "messages[1].tool_calls[0].function.arguments");
  });
});
