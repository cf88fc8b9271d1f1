// Load: 32 concurrent clients x 4 requests against `weft serve -np 8` (more clients than slots, so
// requests queue). Every request completes once, with its own id and its own text (greedy ones
// equal the reply the same prompt gets alone), usage agrees with the tokenizer and the metrics,
// and the latency percentiles are printed. Bounded: each request times out, the test too.
import assert from "node:assert/strict";
import { test } from "node:test";

import { client, collectStream, genUrl, metric, percentile, promptTokens } from "./lib/servers.mjs";

const kClients = 32;
const kRequestsPerClient = 4;

// Request r of client c: its own prompt and seed; every other one greedy, half of them streamed.
function plan(c, r) {
  const i = c * kRequestsPerClient + r;
  return {
    i,
    prompt: `client ${c} request ${r}: once upon a time`,
    greedy: i % 2 === 0,
    stream: (i >> 1) % 2 === 0,
    maxTokens: 8 + (i % 9),
    seed: 1000 + i,
  };
}

async function run(openai, p) {
  const body = {
    model: "gen",
    prompt: p.prompt,
    max_tokens: p.maxTokens,
    temperature: p.greedy ? 0 : 0.9,
    seed: p.seed,
  };
  const t0 = performance.now();
  let out;
  if (p.stream) {
    const s = await collectStream(
      await openai.completions.create({ ...body, stream: true, stream_options: { include_usage: true } }),
    );
    assert.equal(s.ids.size, 1, `request ${p.i}: one id across its chunks`);
    out = { id: [...s.ids][0], text: s.text, finish: s.finish, usage: s.usage };
  } else {
    const r = await openai.completions.create(body);
    out = { id: r.id, text: r.choices[0].text, finish: r.choices[0].finish_reason, usage: r.usage };
  }
  return { ...out, ms: performance.now() - t0 };
}

test(`${kClients} clients x ${kRequestsPerClient} requests on -np 8`, { timeout: 120_000 }, async (t) => {
  const url = genUrl();
  const openai = client(url);
  const generatedBefore = await metric(url, "weft_generated_tokens_total");

  const results = new Map();
  await Promise.all(
    Array.from({ length: kClients }, async (_, c) => {
      for (let r = 0; r < kRequestsPerClient; r++) {
        const p = plan(c, r);
        results.set(p.i, { p, ...(await run(openai, p)) });
      }
    }),
  );
  const generatedAfter = await metric(url, "weft_generated_tokens_total");

  assert.equal(results.size, kClients * kRequestsPerClient, "every request answered");
  const ids = new Set([...results.values()].map((x) => x.id));
  assert.equal(ids.size, results.size, "every response id is distinct");

  let completion = 0, endOfText = 0;
  for (const x of results.values()) {
    assert.ok(["length", "stop"].includes(x.finish), `request ${x.p.i}: finish_reason ${x.finish}`);
    assert.equal(x.usage.prompt_tokens, await promptTokens(url, x.p.prompt), `request ${x.p.i}: prompt_tokens`);
    if (x.finish === "length") assert.equal(x.usage.completion_tokens, x.p.maxTokens, `request ${x.p.i}`);
    else assert.ok(x.usage.completion_tokens < x.p.maxTokens, `request ${x.p.i}`);
    completion += x.usage.completion_tokens;
    endOfText += x.finish === "stop" ? 1 : 0;  // its end-of-generation token was sampled but not counted
  }
  assert.equal(generatedAfter - generatedBefore, completion + endOfText, "the server sampled exactly the tokens replied");

  // Greedy replies do not depend on what else shares the batch: the same prompt alone gives the
  // same text, so no reply went to the wrong client.
  const greedy = [...results.values()].filter((x) => x.p.greedy);
  for (const x of greedy.slice(0, 16)) {
    const alone = await run(openai, { ...x.p, stream: false });
    assert.equal(x.text, alone.text, `request ${x.p.i}: under load as alone`);
  }

  const ms = [...results.values()].map((x) => x.ms).sort((a, b) => a - b);
  t.diagnostic(
    `${results.size} requests, ${completion} tokens: latency p50 ${percentile(ms, 50).toFixed(0)} ms, ` +
      `p99 ${percentile(ms, 99).toFixed(0)} ms, max ${ms[ms.length - 1].toFixed(0)} ms`,
  );
});
