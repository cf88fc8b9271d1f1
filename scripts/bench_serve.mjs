// Load generator of scripts/bench_serve.sh (node >= 20, no packages): streaming /v1/completions
// clients against a running `weft serve`, printing a markdown table.
//   node scripts/bench_serve.mjs URL [--npp 128] [--ntg 32] [--clients 1,8,16] [--rounds 2] [--beside 7]
//                                    [--constrain json_object|schema|FILE]
// Prompts are random words, distinct per request, so no slot's cache holds any of them.
// --constrain: every request's reply constrained by a grammar, to compare with unconstrained
// decoding: response_format json_object, or a json_schema (`schema`: the one below, whose strings
// leave the length to the model; FILE: a schema's JSON). A reply ends where its grammar is
// complete, so the table's token counts (usage) say how long the replies really were.
import { readFileSync } from "node:fs";

const args = process.argv.slice(2);
const url = args[0];
const opt = (name, fallback) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? args[i + 1] : fallback;
};
const npp = Number(opt("npp", 128));
const ntg = Number(opt("ntg", 32));
const clients = opt("clients", "1,8,16").split(",").map(Number);
const rounds = Number(opt("rounds", 2));
const kTimeoutMs = 600_000;
const kSchema = {
  type: "object",
  properties: {
    title: { type: "string" },
    count: { type: "integer" },
    tags: { type: "array", items: { type: "string" } },
    body: { type: "string" },
  },
  required: ["title", "count", "tags", "body"],
  additionalProperties: false,
};
const constrain = opt("constrain", "");
function constraint() {
  if (!constrain) return {};
  if (constrain === "json_object") return { response_format: { type: "json_object" } };
  const schema = constrain === "schema" ? kSchema : JSON.parse(readFileSync(constrain, "utf8"));
  return { response_format: { type: "json_schema", json_schema: { name: "bench", schema } } };
}
const constraintFields = constraint();

let seed = 12345;
function random() {  // xorshift32: the same prompts every run
  seed ^= seed << 13;
  seed ^= seed >>> 17;
  seed ^= seed << 5;
  return (seed >>> 0) / 2 ** 32;
}

// A fresh prompt of exactly npp tokens: random lowercase words, tokenized by the server (so any
// vocabulary works), cut to npp ids.
async function prompt() {
  const words = Array.from({ length: 2 * npp }, () =>
    Array.from({ length: 2 + Math.floor(random() * 6) }, () => String.fromCharCode(97 + Math.floor(random() * 26))).join(""),
  );
  const res = await fetch(`${url}/tokenize`, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ content: words.join(" "), add_special: true }),
    signal: AbortSignal.timeout(kTimeoutMs),
  });
  const ids = (await res.json()).tokens;
  if (ids.length < npp) throw new Error(`${ids.length} tokens from 2 * ${npp} words`);
  return ids.slice(0, npp);
}

// One streamed completion: times of its response headers (the server sends them once the first
// token is drawn), first and last text event, and the tokens it generated (usage).
async function complete(ids, maxTokens, signal, onFirst) {
  const t0 = performance.now();
  const res = await fetch(`${url}/v1/completions`, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({
      prompt: ids,
      max_tokens: maxTokens,
      temperature: 0,
      stream: true,
      stream_options: { include_usage: true },
      ...constraintFields,
    }),
    signal: signal ?? AbortSignal.timeout(kTimeoutMs),
  });
  if (!res.ok) throw new Error(`HTTP ${res.status}: ${await res.text()}`);
  const r = { ttft: performance.now() - t0, first: null, last: null, tokens: 0 };
  let buffer = "";
  const decoder = new TextDecoder();
  try {
    for await (const bytes of res.body) {
      buffer += decoder.decode(bytes, { stream: true });
      let end;
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        const data = buffer.slice(6, end);
        buffer = buffer.slice(end + 2);
        if (data === "[DONE]") continue;
        const event = JSON.parse(data);
        if (event.error) throw new Error(event.error.message);
        if (event.usage) r.tokens = event.usage.completion_tokens;
        if (event.choices.length) {
          r.last = performance.now();
          if (r.first === null) {
            r.first = r.last;
            onFirst?.();
          }
        }
      }
    }
  } catch (e) {
    if (!signal?.aborted) throw e;
  }
  r.end = performance.now();
  return r;
}

function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

// n clients, each running `rounds` requests one after another.
async function throughput(n) {
  const prompts = [];
  for (let i = 0; i < n * rounds; i++) prompts.push(await prompt());  // before the clock starts
  const t0 = performance.now();
  const all = (await Promise.all(
    Array.from({ length: n }, async (_, c) => {
      const mine = [];
      for (let r = 0; r < rounds; r++) mine.push(await complete(prompts[c * rounds + r], ntg));
      return mine;
    }),
  )).flat();
  const wall = (performance.now() - t0) / 1000;
  const tokens = all.reduce((a, r) => a + r.tokens, 0);
  // Decode rate: each request's tokens after its first, over the time they took, summed over the
  // clients running at once.
  const decode = n * median(all.map((r) => (r.tokens - 1) / ((r.last - r.first) / 1000)));
  return { n, requests: all.length, tokens, wall, tps: tokens / wall, decode, ttft: median(all.map((r) => r.ttft)) };
}

// Time to first token of one prompt while `others` sequences decode (they have all streamed a
// token before it is sent), median of 3.
async function ttftBeside(others) {
  const times = [];
  for (let k = 0; k < 3; k++) {
    const stop = new AbortController();
    let decoding = 0;
    let allDecoding;
    const ready = new Promise((resolve) => (allDecoding = resolve));
    const prompts = [];
    for (let i = 0; i <= others; i++) prompts.push(await prompt());
    const background = prompts.slice(1).map((ids) =>
      complete(ids, 4096, stop.signal, () => ++decoding === others && allDecoding()),
    );
    if (others === 0) allDecoding();
    await ready;
    times.push((await complete(prompts[0], 1)).ttft);
    stop.abort();
    await Promise.all(background);
    await new Promise((r) => setTimeout(r, 200));  // the server frees the cancelled slots
  }
  return median(times);
}

await complete(await prompt(), 4);  // warm-up: the first request also pays for first touches
const rows = [];
for (const n of clients) rows.push(await throughput(n));
if (constrain) console.log(`Every reply constrained: ${JSON.stringify(constraintFields)}\n`);
console.log(`| clients | requests | generated | wall s | gen t/s (end to end) | decode t/s | median TTFT ms |`);
console.log(`|---:|---:|---:|---:|---:|---:|---:|`);
for (const r of rows)
  console.log(
    `| ${r.n} | ${r.requests} | ${r.tokens} | ${r.wall.toFixed(2)} | ${r.tps.toFixed(1)} | ${r.decode.toFixed(1)} | ${r.ttft.toFixed(0)} |`,
  );

const beside = Number(opt("beside", 7));
const alone = await ttftBeside(0);
const loaded = await ttftBeside(beside);
console.log(`\nTTFT of a ${npp}-token prompt: alone ${alone.toFixed(0)} ms, beside ${beside} decoding ${loaded.toFixed(0)} ms`);
