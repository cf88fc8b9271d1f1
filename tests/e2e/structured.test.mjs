// Structured output through the official openai client: a json_schema response_format whose reply,
// whole and streamed, parses and validates against the schema (the models write random or story
// text: only the grammar makes it JSON).
import assert from "node:assert/strict";
import { describe, test } from "node:test";

import { client, models } from "./lib/servers.mjs";

const kTestTimeoutMs = 60_000;
const schema = {
  type: "object",
  properties: {
    name: { type: "string", maxLength: 12 },
    age: { type: "integer", minimum: 0, maximum: 120 },
    pets: { type: "array", items: { enum: ["cat", "dog"] }, maxItems: 3 },
    alive: { type: "boolean" },
  },
  required: ["name", "age", "pets"],
  additionalProperties: false,
};

// The errors of `v` against the part of JSON Schema `schema` uses (empty: valid).
function errors(v, s, at = "") {
  const out = [];
  const type = Array.isArray(v) ? "array" : v === null ? "null" : Number.isInteger(v) ? "integer" : typeof v;
  if (s.enum && !s.enum.includes(v)) out.push(`${at}: ${JSON.stringify(v)} not in the enum`);
  if (s.type && s.type !== type) return [...out, `${at}: ${type}, not ${s.type}`];
  if (type === "string" && s.maxLength !== undefined && [...v].length > s.maxLength) out.push(`${at}: too long`);
  if (s.minimum !== undefined && v < s.minimum) out.push(`${at}: below the minimum`);
  if (s.maximum !== undefined && v > s.maximum) out.push(`${at}: above the maximum`);
  if (type === "array") {
    if (s.maxItems !== undefined && v.length > s.maxItems) out.push(`${at}: too many items`);
    v.forEach((e, i) => out.push(...errors(e, s.items ?? {}, `${at}/${i}`)));
  }
  if (type === "object") {
    for (const k of s.required ?? []) if (!(k in v)) out.push(`${at}: '${k}' missing`);
    for (const [k, e] of Object.entries(v)) {
      if (s.properties?.[k]) out.push(...errors(e, s.properties[k], `${at}/${k}`));
      else if (s.additionalProperties === false) out.push(`${at}: '${k}' not allowed`);
    }
  }
  return out;
}

function expectValid(text) {
  let v;
  assert.doesNotThrow(() => (v = JSON.parse(text)), `the reply parses as JSON: ${text}`);
  assert.deepEqual(errors(v, schema), [], text);
  // The keys come in the schema's order (required first, then the optional one).
  const order = Object.keys(schema.properties);
  const keys = Object.keys(v);
  assert.deepEqual(keys, [...keys].sort((a, b) => order.indexOf(a) - order.indexOf(b)), text);
}

for (const m of models()) {
  describe(`${m.name} model`, { timeout: kTestTimeoutMs }, () => {
    const openai = client(m.url);
    const request = {
      model: m.name,
      messages: [{ role: "user", content: "Describe a person as JSON." }],
      max_tokens: 300,
      temperature: 0.9,
      seed: 11,
      response_format: { type: "json_schema", json_schema: { name: "person", schema, strict: true } },
    };

    test("json_schema: the reply validates, whole and streamed, and ends by itself", async () => {
      const whole = await openai.chat.completions.create(request);
      assert.equal(whole.choices[0].finish_reason, "stop", "the grammar ended the reply");
      expectValid(whole.choices[0].message.content);

      const stream = await openai.chat.completions.create({ ...request, stream: true });
      let text = "";
      let finish = null;
      for await (const chunk of stream)
        for (const c of chunk.choices) {
          if (c.delta?.content) text += c.delta.content;
          if (c.finish_reason) finish = c.finish_reason;
        }
      assert.equal(finish, "stop");
      expectValid(text);
      assert.equal(text, whole.choices[0].message.content, "the same seed, the same reply");
    });

    test("a schema weft cannot enforce is a 400 naming the keyword", async () => {
      const bad = { ...schema, properties: { ...schema.properties, name: { type: "string", pattern: "^[A-Z]" } } };
      await assert.rejects(
        openai.chat.completions.create({
          ...request,
          response_format: { type: "json_schema", json_schema: { name: "person", schema: bad } },
        }),
        (e) => e.status === 400 && /pattern/.test(e.message),
      );
    });
  });
}
