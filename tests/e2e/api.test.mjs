// weft serve through the official openai client: chat and completions, whole and streamed, the
// model list, usage counts against the server's own tokenizer, max_tokens and stop strings.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import OpenAI from "openai";

import { chatPromptTokens, client, collectStream, models, promptTokens } from "./lib/servers.mjs";

const kTestTimeoutMs = 60_000;
const kMaxTokens = 24;
const messages = [
  { role: "system", content: "You are a storyteller." },
  { role: "user", content: "Tell me about a little dog." },
];
const prompt = "Once upon a time, there was a little";

// A stop string taken from text the model generates: two printable ASCII characters from its
// second half, cut at their first occurrence (so the expected reply is the text before it).
function stopStringIn(text) {
  for (let a = Math.floor(text.length / 2); a + 2 <= text.length; a++) {
    const s = text.slice(a, a + 2);
    if (!/^[\x21-\x7e]{2}$/.test(s)) continue;
    const at = text.indexOf(s);
    if (at > 0) return { stop: s, before: text.slice(0, at) };
  }
  throw new Error(`no printable stop string in the generated text ${JSON.stringify(text)}`);
}

function checkUsage(usage, promptTokensExpected, finish, maxTokens) {
  assert.equal(usage.prompt_tokens, promptTokensExpected, "prompt_tokens: the rendered prompt as /tokenize counts it");
  assert.equal(usage.total_tokens, usage.prompt_tokens + usage.completion_tokens);
  if (finish === "length") assert.equal(usage.completion_tokens, maxTokens, "finish_reason length: max_tokens tokens");
  else assert.ok(usage.completion_tokens < maxTokens, `finish_reason ${finish} before max_tokens`);
}

for (const m of models()) {
  describe(`${m.name} model`, { timeout: kTestTimeoutMs }, () => {
    const openai = client(m.url);
    const greedy = { model: m.name, temperature: 0, max_tokens: kMaxTokens };

    test("GET /v1/models lists the served model", async () => {
      const list = await openai.models.list();
      assert.deepEqual(
        list.data.map((x) => x.id),
        [m.name],
      );
      assert.equal(list.data[0].object, "model");
    });

    test("chat: whole reply, then the same reply streamed", async () => {
      const whole = await openai.chat.completions.create({ ...greedy, messages });
      assert.match(whole.id, /^chatcmpl-/);
      assert.equal(whole.object, "chat.completion");
      assert.equal(whole.model, m.name);
      assert.equal(whole.choices.length, 1);
      const choice = whole.choices[0];
      assert.equal(choice.message.role, "assistant");
      assert.ok(choice.message.content.length > 0, "a reply with text");
      assert.equal(choice.finish_reason, "length", "24 greedy tokens without an end-of-generation token");
      checkUsage(whole.usage, await chatPromptTokens(m.url, messages), choice.finish_reason, kMaxTokens);

      const stream = await openai.chat.completions.create({
        ...greedy,
        messages,
        stream: true,
        stream_options: { include_usage: true },
      });
      const s = await collectStream(stream);
      assert.equal(s.ids.size, 1, "every chunk carries the reply's one id");
      assert.match([...s.ids][0], /^chatcmpl-/);
      assert.equal(s.text, choice.message.content, "the deltas add up to the whole reply");
      assert.equal(s.finish, choice.finish_reason);
      if (m.wholeTokens) assert.equal(s.deltas.length, s.usage.completion_tokens, "one delta per token");
      else assert.ok(s.deltas.length >= 2 && s.deltas.length <= s.usage.completion_tokens, `${s.deltas.length} deltas`);
      assert.equal(s.usage.prompt_tokens, whole.usage.prompt_tokens);
      assert.equal(s.usage.completion_tokens, whole.usage.completion_tokens);
    });

    test("chat stream without include_usage carries no usage", async () => {
      const stream = await openai.chat.completions.create({ ...greedy, max_tokens: 4, messages, stream: true });
      const s = await collectStream(stream);
      assert.equal(s.usage, null);
      assert.equal(s.finish, "length");
    });

    test("completions: whole and streamed, usage against /tokenize", async () => {
      const whole = await openai.completions.create({ ...greedy, prompt });
      assert.match(whole.id, /^cmpl-/);
      assert.equal(whole.object, "text_completion");
      const choice = whole.choices[0];
      assert.equal(choice.finish_reason, "length");
      checkUsage(whole.usage, await promptTokens(m.url, prompt), choice.finish_reason, kMaxTokens);

      const stream = await openai.completions.create({
        ...greedy,
        prompt,
        stream: true,
        stream_options: { include_usage: true },
      });
      const s = await collectStream(stream);
      assert.equal(s.ids.size, 1);
      assert.equal(s.text, choice.text);
      assert.equal(s.finish, "length");
      assert.equal(s.usage.completion_tokens, kMaxTokens);
      assert.equal(s.usage.prompt_tokens, whole.usage.prompt_tokens);
      if (m.wholeTokens) assert.equal(s.deltas.length, kMaxTokens, "one delta per token");
    });

    test("max_tokens ends a reply with finish_reason length, a prefix of a longer one", async () => {
      const long = await openai.completions.create({ ...greedy, prompt });
      for (const n of [1, 5]) {
        const short = await openai.completions.create({ ...greedy, prompt, max_tokens: n });
        assert.equal(short.choices[0].finish_reason, "length");
        assert.equal(short.usage.completion_tokens, n);
        // A reply cut inside a UTF-8 character ends in U+FFFD where the longer one goes on.
        const text = short.choices[0].text.replace(/\uFFFD$/, "");
        assert.ok(long.choices[0].text.startsWith(text), `${JSON.stringify(text)} begins the longer reply`);
      }
    });

    test("stop strings end the reply before them, whole and streamed", async () => {
      const free = await openai.completions.create({ ...greedy, prompt });
      const { stop, before } = stopStringIn(free.choices[0].text);
      const whole = await openai.completions.create({ ...greedy, prompt, stop: [stop, "\u0001never"] });
      assert.equal(whole.choices[0].text, before, `stopped before ${JSON.stringify(stop)}`);
      assert.equal(whole.choices[0].finish_reason, "stop");
      assert.ok(whole.usage.completion_tokens < kMaxTokens);
      // Streamed, the server must hold back text that might begin the stop string.
      const s = await collectStream(
        await openai.completions.create({ ...greedy, prompt, stop, stream: true, stream_options: { include_usage: true } }),
      );
      assert.equal(s.text, before);
      assert.equal(s.finish, "stop");
      assert.equal(s.usage.completion_tokens, whole.usage.completion_tokens);
    });

    test("a bad field is a 400 the client raises as BadRequestError", async () => {
      await assert.rejects(openai.chat.completions.create({ ...greedy, messages, n: 2 }), (e) => {
        assert.ok(e instanceof OpenAI.BadRequestError, `got ${e.constructor.name}: ${e.message}`);
        assert.equal(e.status, 400);
        assert.match(e.message, /'n' must be 1/);
        return true;
      });
    });
  });
}
