// A server started with --api-key-file: the wrong key or none is a 401 the openai client raises as
// AuthenticationError; the right key works; health and the model list stay public.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import OpenAI from "openai";

import { client, kRequestTimeoutMs, keyedServer } from "./lib/servers.mjs";

const { url, key } = keyedServer();
const request = { model: "gen", messages: [{ role: "user", content: "hi" }], max_tokens: 2, temperature: 0 };

function isAuthError(e) {
  assert.ok(e instanceof OpenAI.AuthenticationError, `got ${e.constructor.name}: ${e.message}`);
  assert.equal(e.status, 401);
  assert.equal(e.error.type, "authentication_error");
  return true;
}

describe("API key", { timeout: 60_000 }, () => {
  test("a wrong key is refused on chat and completions", async () => {
    const wrong = client(url, key + "x");
    await assert.rejects(wrong.chat.completions.create(request), isAuthError);
    await assert.rejects(wrong.completions.create({ model: "gen", prompt: "hi", max_tokens: 2 }), isAuthError);
    await assert.rejects(
      wrong.chat.completions.create({ ...request, stream: true }),
      isAuthError,
      "a stream is refused before it starts",
    );
  });

  test("no key at all is refused, naming the header to send", async () => {
    const res = await fetch(`${url}/v1/chat/completions`, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(request),
      signal: AbortSignal.timeout(kRequestTimeoutMs),
    });
    assert.equal(res.status, 401);
    assert.match((await res.json()).error.message, /Authorization: Bearer/);
  });

  test("the right key is served", async () => {
    const reply = await client(url, key).chat.completions.create(request);
    assert.equal(reply.choices[0].finish_reason, "length");
    assert.equal(reply.usage.completion_tokens, 2);
  });

  test("health and the model list need no key", async () => {
    const anyone = client(url, "not-the-key");
    assert.deepEqual(
      (await anyone.models.list()).data.map((m) => m.id),
      ["gen"],
    );
    const health = await fetch(`${url}/health`, { signal: AbortSignal.timeout(kRequestTimeoutMs) });
    assert.equal(health.status, 200);
  });
});
