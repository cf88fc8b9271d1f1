// weft serve against clients that do not play fair, over raw sockets: bodies past the limit by
// other framings, a body where none is taken, pages of other origins, slow heads while /health
// must stay answered, and a client that half-closes. Every socket carries a deadline.
import assert from "node:assert/strict";
import net from "node:net";
import { describe, test } from "node:test";
import zlib from "node:zlib";

import { genUrl, kRequestTimeoutMs } from "./lib/servers.mjs";

const { hostname, port } = new URL(genUrl());

// Sends `head` (and `body`), optionally half-closes, and resolves with everything the server sends
// before closing (or what came before the deadline).
function exchange(head, { body = null, halfClose = false, timeoutMs = 10_000 } = {}) {
  return new Promise((resolve) => {
    const chunks = [];
    const sock = net.connect(Number(port), hostname, () => {
      sock.write(head);
      if (body) sock.write(body);
      if (halfClose) sock.end();
    });
    const done = () => resolve(Buffer.concat(chunks).toString("latin1"));
    sock.setTimeout(timeoutMs, () => sock.destroy());
    sock.on("data", (d) => chunks.push(d));
    sock.on("error", () => {});
    sock.on("close", done);
  });
}

const finalStatus = (reply) => Number(/HTTP\/1\.1 ([2-5]\d\d)/.exec(reply)?.[1] ?? 0);
const jsonPost = (path, body, extra = "") =>
  `POST ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n` +
  `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n${extra}\r\n${body}`;

describe("hostile clients", { timeout: 120_000 }, () => {
  test("a chunked body is refused on its head, before 600 MiB could arrive", async () => {
    const reply = await exchange(
      "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" +
        "Transfer-Encoding: chunked\r\n\r\n" + `${(600 << 20).toString(16)}\r\n`,
    );
    assert.equal(finalStatus(reply), 411, reply);
  });

  test("a gzip body is refused, not inflated", async () => {
    const bomb = zlib.gzipSync(Buffer.alloc(64 << 20));
    const reply = await exchange(
      "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" +
        `Content-Encoding: gzip\r\nContent-Length: ${bomb.length}\r\n\r\n`,
      { body: bomb },
    );
    assert.equal(finalStatus(reply), 415, reply);
  });

  test("a body posted to /health is refused unread", async () => {
    // The body is never sent: a server waiting to read it would not answer before the deadline.
    const reply = await exchange("POST /health HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 4000000\r\n\r\n", {
      timeoutMs: 4000,
    });
    assert.equal(finalStatus(reply), 404, reply);
  });

  test("a text/plain body (no CORS preflight needed) is refused", async () => {
    const reply = await exchange(
      jsonPost("/v1/completions", '{"prompt": "hi", "max_tokens": 1}').replace("application/json", "text/plain"),
    );
    assert.equal(finalStatus(reply), 415, reply);
  });

  test("a Host that is not loopback (DNS rebinding) and a foreign Origin are refused", async () => {
    const rebound = await exchange("GET /v1/models HTTP/1.1\r\nHost: attacker.example:80\r\nConnection: close\r\n\r\n");
    assert.equal(finalStatus(rebound), 403, rebound);
    const foreign = await exchange(jsonPost("/tokenize", '{"content": "a"}', "Origin: https://attacker.example\r\n"));
    assert.equal(finalStatus(foreign), 403, foreign);
  });

  test("a client that half-closes after its request gets the reply", async () => {
    const reply = await exchange(jsonPost("/v1/completions", '{"prompt": "hi", "max_tokens": 2}'), { halfClose: true });
    assert.equal(finalStatus(reply), 200, reply);
    assert.match(reply, /"completion_tokens":2/);
  });

  test("/health answers while 300 connections trickle their heads", async () => {
    const slow = [];
    for (let i = 0; i < 300; i++) {
      const s = net.connect(Number(port), hostname);
      s.on("error", () => {});
      s.setTimeout(30_000, () => s.destroy());
      slow.push(s);
    }
    const head = "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n";
    let i = 0;
    const timer = setInterval(() => {
      for (const s of slow) if (!s.destroyed) s.write(head[i % head.length]);
      i++;
    }, 200);
    try {
      await new Promise((r) => setTimeout(r, 1000));
      for (let k = 0; k < 3; k++) {
        const res = await fetch(`${genUrl()}/health`, { signal: AbortSignal.timeout(kRequestTimeoutMs / 6) });
        assert.equal(res.status, 200);
      }
    } finally {
      clearInterval(timer);
      for (const s of slow) s.destroy();
    }
  });
});
