// Log-probabilities through the official openai client: chat's logprobs/top_logprobs and the
// completions endpoint's legacy logprobs N, whole and streamed, and the two endpoints agreeing on
// the same greedy request (the chat's rendered prompt sent as a completion).
import assert from "node:assert/strict";
import { describe, test } from "node:test";

import { client, models, postJson } from "./lib/servers.mjs";

const kTestTimeoutMs = 60_000;
const kMaxTokens = 12;
const kTop = 5;
// The two endpoints run the same numbers, but the completion may find the prompt in a slot's
// cache and compute its last token alone rather than in a prompt batch (another summation order).
const kLogprobTol = 1e-3;
const messages = [{ role: "user", content: "Tell me about a little dog." }];

// A token's text in JSON is whole characters; a byte token's half character shows as U+FFFD, and
// two such tokens can share a text: those are compared through their bytes only.
const plainText = (t) => !t.includes("\uFFFD");

for (const m of models()) {
  describe(`${m.name} model`, { timeout: kTestTimeoutMs }, () => {
    const openai = client(m.url);
    const greedy = { model: m.name, temperature: 0, max_tokens: kMaxTokens };

    test("chat: logprobs with top_logprobs, whole, then streamed chunk by chunk", async () => {
      const whole = await openai.chat.completions.create({ ...greedy, messages, logprobs: true, top_logprobs: kTop });
      const choice = whole.choices[0];
      const content = choice.logprobs.content;
      assert.ok(content.length > 0);
      if (choice.finish_reason === "length") assert.equal(content.length, whole.usage.completion_tokens);
      const bytes = [];
      for (const e of content) {
        assert.ok(e.logprob <= 0, `logprob ${e.logprob}`);
        assert.equal(e.top_logprobs.length, kTop);
        // Greedy: the token drawn is the likeliest, and its alternatives come in order.
        assert.deepEqual(e.top_logprobs[0].bytes, e.bytes);
        assert.equal(e.top_logprobs[0].logprob, e.logprob);
        for (let k = 1; k < kTop; k++) assert.ok(e.top_logprobs[k].logprob <= e.top_logprobs[k - 1].logprob);
        bytes.push(...e.bytes);
      }
      assert.equal(Buffer.from(bytes).toString("utf8"), choice.message.content, "the tokens' bytes are the reply");

      const stream = await openai.chat.completions.create({
        ...greedy,
        messages,
        logprobs: true,
        top_logprobs: kTop,
        stream: true,
      });
      const streamed = [];
      let text = "";
      for await (const chunk of stream)
        for (const c of chunk.choices) {
          if (c.delta?.content) text += c.delta.content;
          if (c.logprobs) {
            assert.ok(c.delta.content, "logprobs ride on the chunk with their tokens' text");
            streamed.push(...c.logprobs.content);
          }
        }
      assert.equal(text, choice.message.content);
      assert.deepEqual(streamed, content, "the chunks' logprobs add up to the whole reply's");
    });

    test("completions: logprobs N in the legacy shape, whole and streamed, matching the chat's", async () => {
      const chat = await openai.chat.completions.create({ ...greedy, messages, logprobs: true, top_logprobs: kTop });
      const { prompt } = await postJson(m.url, "/apply-template", { messages });
      const whole = await openai.completions.create({ ...greedy, prompt, logprobs: kTop });
      const choice = whole.choices[0];
      assert.equal(choice.text, chat.choices[0].message.content, "the same greedy text from the same prompt");
      const lp = choice.logprobs;
      const chatContent = chat.choices[0].logprobs.content;
      assert.equal(lp.tokens.length, chatContent.length);
      let offset = 0;
      for (let i = 0; i < lp.tokens.length; i++) {
        assert.equal(lp.text_offset[i], offset);
        offset += lp.tokens[i].length;
        const c = chatContent[i];
        assert.equal(lp.tokens[i], c.token);
        const near = (a, b) => Math.abs(a - b) < kLogprobTol;
        assert.ok(near(lp.token_logprobs[i], c.logprob), `token ${i}: ${lp.token_logprobs[i]} vs ${c.logprob}`);
        // The chat's top entries are the completion's, by text where the text is whole characters.
        for (const alt of c.top_logprobs.filter((a) => plainText(a.token))) {
          const got = lp.top_logprobs[i][alt.token];
          const what = `token ${i}: ${JSON.stringify(alt.token)}`;
          assert.ok(got !== undefined, `${what} missing from ${JSON.stringify(lp.top_logprobs[i])}`);
          if (c.top_logprobs.filter((a) => a.token === alt.token).length === 1)
            assert.ok(near(got, alt.logprob), `${what}: ${got} vs ${alt.logprob}`);
        }
      }

      const stream = await openai.completions.create({ ...greedy, prompt, logprobs: kTop, stream: true });
      const tokens = [];
      const offsets = [];
      for await (const chunk of stream)
        for (const c of chunk.choices)
          if (c.logprobs) {
            tokens.push(...c.logprobs.tokens);
            offsets.push(...c.logprobs.text_offset);
          }
      assert.deepEqual(tokens, lp.tokens);
      assert.deepEqual(offsets, lp.text_offset);
    });

    test("chat: sampled, each drawn token is among its top_logprobs with the same logprob", async () => {
      // top_k = the number of alternatives listed: whatever is drawn is among them.
      const sampled = { model: m.name, temperature: 1.2, top_k: kTop, seed: 5, max_tokens: 24 };
      const whole = await openai.chat.completions.create({ ...sampled, messages, logprobs: true, top_logprobs: kTop });
      const content = whole.choices[0].logprobs.content;
      assert.ok(content.length > 0);
      let notFirst = 0;
      for (const [i, e] of content.entries()) {
        const what = `token ${i}: ${JSON.stringify(e)}`;
        assert.equal(e.top_logprobs.length, kTop, what);
        for (let k = 1; k < kTop; k++) assert.ok(e.top_logprobs[k].logprob <= e.top_logprobs[k - 1].logprob, what);
        const mass = e.top_logprobs.reduce((sum, a) => sum + Math.exp(a.logprob), 0);
        assert.ok(mass <= 1 + 1e-4, `${what}: the top entries hold ${mass} of the probability`);
        const same = (a) => Buffer.from(a.bytes).equals(Buffer.from(e.bytes)) && a.logprob === e.logprob;
        assert.ok(e.top_logprobs.some(same), `${what}: the drawn token is not among its top_logprobs`);
        if (e.logprob < e.top_logprobs[0].logprob) notFirst++;
      }
      assert.ok(notFirst > 0, "sampling drew some token other than the likeliest");
    });

    test("a bad logprobs value is a 400 naming the field", async () => {
      await assert.rejects(
        openai.chat.completions.create({ ...greedy, messages, logprobs: true, top_logprobs: 21 }),
        (e) => e.status === 400 && /top_logprobs/.test(e.message),
      );
      await assert.rejects(
        openai.chat.completions.create({ ...greedy, messages, top_logprobs: 2 }),
        (e) => e.status === 400 && /requires 'logprobs'/.test(e.message),
      );
      await assert.rejects(
        openai.completions.create({ ...greedy, prompt: "hello", logprobs: 99 }),
        (e) => e.status === 400 && /'logprobs' must be between 0 and 20/.test(e.message),
      );
    });
  });
}
