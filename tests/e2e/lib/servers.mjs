// The servers scripts/e2e.sh started, named by environment variables, and small helpers to talk
// to them. Every request here carries a timeout: a hung server fails a test, never stalls it.
import OpenAI from "openai";

export const kRequestTimeoutMs = 30_000;

function required(name) {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set: run the end-to-end tests through scripts/e2e.sh`);
  return v;
}

// The models each test file runs on: a generated one (always), stories260K when ../shared has it.
// wholeTokens: every token's text is whole characters (stories260K's English), so a stream sends
// one delta per token; the generated model's byte tokens may hold a character back for the next.
export function models() {
  const list = [{ name: "gen", url: required("WEFT_E2E_GEN_URL"), wholeTokens: false }];
  if (process.env.WEFT_E2E_STORIES_URL)
    list.push({ name: "stories260K", url: process.env.WEFT_E2E_STORIES_URL, wholeTokens: true });
  return list;
}
export const genUrl = () => required("WEFT_E2E_GEN_URL");
export const keyedServer = () => ({ url: required("WEFT_E2E_KEYED_URL"), key: required("WEFT_E2E_KEY") });

// An openai client without retries: a refused request must show, not be tried again.
export function client(url, apiKey = "unused") {
  return new OpenAI({ baseURL: `${url}/v1`, apiKey, maxRetries: 0, timeout: kRequestTimeoutMs });
}

export async function postJson(url, path, body, headers = {}) {
  const res = await fetch(url + path, {
    method: "POST",
    headers: { "Content-Type": "application/json", ...headers },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(kRequestTimeoutMs),
  });
  const json = await res.json();
  if (!res.ok) throw new Error(`POST ${path}: HTTP ${res.status}: ${JSON.stringify(json)}`);
  return json;
}

export async function getText(url, path) {
  const res = await fetch(url + path, { signal: AbortSignal.timeout(kRequestTimeoutMs) });
  if (!res.ok) throw new Error(`GET ${path}: HTTP ${res.status}`);
  return res.text();
}

// Token count of a prompt as the server feeds it: with BOS (add_special), special tokens parsed.
export async function promptTokens(url, text) {
  const r = await postJson(url, "/tokenize", { content: text, add_special: true, parse_special: true });
  return r.tokens.length;
}

// The chat prompt the server renders for these messages, counted the same way.
export async function chatPromptTokens(url, messages) {
  const { prompt } = await postJson(url, "/apply-template", { messages });
  return promptTokens(url, prompt);
}

// One sample of a Prometheus counter or gauge without labels (NaN when absent).
export async function metric(url, name) {
  const text = await getText(url, "/metrics");
  const line = text.split("\n").find((l) => l.startsWith(name + " "));
  return line ? Number(line.slice(name.length + 1)) : NaN;
}

// Reads a chat or completion stream: the text of every delta, the finish reason, the usage
// chunk and the distinct ids it carried.
export async function collectStream(stream) {
  const out = { deltas: [], finish: null, usage: null, ids: new Set(), chunks: 0 };
  for await (const chunk of stream) {
    out.chunks++;
    out.ids.add(chunk.id);
    if (chunk.usage) out.usage = chunk.usage;
    for (const c of chunk.choices) {
      const text = c.delta ? c.delta.content : c.text;
      if (text) out.deltas.push(text);
      if (c.finish_reason) out.finish = c.finish_reason;
    }
  }
  out.text = out.deltas.join("");
  return out;
}

export function percentile(sorted, p) {
  const i = Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1);
  return sorted[Math.max(0, i)];
}
