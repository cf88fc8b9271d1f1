// The chat page (GET /) in headless Chromium: type a message, send it, and watch the streamed
// reply grow in the page until it equals the greedy reply the API gives for the same chat.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { chromium } from "playwright-core";

import { client, genUrl } from "./lib/servers.mjs";

// WEFT_E2E_SCREENSHOT=FILE.png keeps a picture of the page after the reply.
const kChromium = process.env.WEFT_E2E_CHROMIUM || "/usr/bin/chromium";
const kStepMs = 20_000;
const kMaxTokens = 24;
const kMessage = "Tell me a story about a cat.";

let context, profile;

before(async () => {
  // A fresh profile, and a closed network: without these flags Chromium waits on lookups of
  // Google's services.
  profile = mkdtempSync(join(tmpdir(), "weft-e2e-chromium-"));
  context = await chromium.launchPersistentContext(profile, {
    executablePath: kChromium,
    headless: true,
    timeout: kStepMs,
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
  });
});

after(async () => {
  await context?.close();
  if (profile) rmSync(profile, { recursive: true, force: true });
});

test("chat page streams a reply into the page", { timeout: 60_000 }, async (t) => {
  const url = genUrl();
  const expected = await client(url).chat.completions.create({
    model: "gen",
    messages: [{ role: "user", content: kMessage }],
    temperature: 0,
    max_tokens: kMaxTokens,
  });
  const expectedText = expected.choices[0].message.content;

  const page = await context.newPage();
  page.setDefaultTimeout(kStepMs);
  const pageErrors = [];
  page.on("pageerror", (e) => pageErrors.push(e.message));
  await page.goto(url + "/", { waitUntil: "load" });
  await page.waitForFunction(() => document.getElementById("model").textContent === "gen");

  // Every text the assistant's bubble shows, in order. The page sets the bubble's textContent on
  // each delta, which replaces its text node: the added nodes keep each step's text even when
  // several deltas land before the observer runs.
  await page.evaluate(() => {
    window.replySteps = [];
    new MutationObserver((records) => {
      for (const r of records)
        if (r.target.classList && r.target.classList.contains("assistant"))
          for (const n of r.addedNodes) window.replySteps.push(n.textContent);
    }).observe(document.getElementById("log"), { childList: true, subtree: true });
  });
  await page.fill("#temperature", "0");
  await page.fill("#max_tokens", String(kMaxTokens));
  await page.locator("#input").pressSequentially(kMessage);
  await page.keyboard.press("Enter");

  // Done when the send button is enabled again (an error adds a third bubble).
  await page.waitForFunction(() => document.querySelectorAll(".msg").length >= 2 && !document.getElementById("send").disabled);
  const { user, reply, steps, errors } = await page.evaluate(() => ({
    user: document.querySelector(".msg.user").textContent,
    reply: document.querySelector(".msg.assistant").textContent,
    steps: window.replySteps,
    errors: [...document.querySelectorAll(".msg.error")].map((e) => e.textContent),
  }));
  assert.deepEqual(errors, []);
  assert.deepEqual(pageErrors, []);
  assert.equal(user, kMessage);
  assert.equal(reply, expectedText, "the page shows the greedy reply");
  const growing = steps.filter((s) => s.length > 0);
  assert.ok(growing.length >= 2, `the reply appeared in ${growing.length} steps: ${JSON.stringify(steps)}`);
  for (let i = 1; i < growing.length; i++)
    assert.ok(growing[i].startsWith(growing[i - 1]), `step ${i} extends the one before it`);
  assert.equal(growing[growing.length - 1], expectedText);
  t.diagnostic(`the reply grew in ${growing.length} steps to ${reply.length} characters`);
  if (process.env.WEFT_E2E_SCREENSHOT) await page.screenshot({ path: process.env.WEFT_E2E_SCREENSHOT });
  await page.close();
});
