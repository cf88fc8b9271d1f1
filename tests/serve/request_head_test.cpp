// check_head, the gate's judgement of a request head before any body is read: framing httplib
// cannot bound, bodies where none is taken, and what a page of another origin could send.
#include "serve/request_head.h"

#include <gtest/gtest.h>

namespace weft::serve {
namespace {

HeadPolicy policy() {
  HeadPolicy p;
  p.max_body_bytes = 1000;
  p.body_paths = {"/v1/completions"};
  return p;
}

// A POST of a JSON body to /v1/completions from a loopback client, with extra header lines.
std::string post(const std::string& extra, const std::string& target = "/v1/completions") {
  return "POST " + target + " HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nContent-Type: application/json\r\n" + extra + "\r\n";
}

HeadVerdict check(const std::string& head, const HeadPolicy& p = policy()) {
  EXPECT_EQ(head_end(head), head.size()) << head;
  return check_head(head, p);
}

TEST(RequestHead, EndIsTheFirstBlankLine) {
  EXPECT_EQ(head_end("GET / HTTP/1.1\r\nHost: a\r\n"), std::string_view::npos);
  EXPECT_EQ(head_end("GET / HTTP/1.1\r\n\r\nbody"), 18u);
}

TEST(RequestHead, AcceptsAJsonPostWithinTheLimit) {
  const HeadVerdict v = check(post("Content-Length: 1000\r\n", "/v1/completions?x=1"));
  EXPECT_EQ(v.status, 0) << v.message;
  EXPECT_EQ(v.head.method, "POST");
  EXPECT_EQ(v.head.path, "/v1/completions");
  EXPECT_EQ(v.head.content_length, 1000u);
  EXPECT_EQ(v.head.head_bytes, post("Content-Length: 1000\r\n").size() + 4);
  EXPECT_EQ(check(post("Content-Type: x\r\n").substr(0, 0) + post("")).status, 0);  // no body at all
  EXPECT_EQ(check("GET /health HTTP/1.1\r\nHost: localhost:1\r\n\r\n").status, 0);
}

TEST(RequestHead, ChunkedBodiesAreRefusedAndWithContentLengthMalformed) {
  HeadVerdict v = check(post("Transfer-Encoding: chunked\r\n"));
  EXPECT_EQ(v.status, 411);
  EXPECT_EQ(v.message, "chunked request bodies are not accepted: send the body with a Content-Length");
  v = check(post("Content-Length: 5\r\nTransfer-Encoding: chunked\r\n"));
  EXPECT_EQ(v.status, 400);
  EXPECT_EQ(v.message, "a request may not have both Content-Length and Transfer-Encoding");
}

TEST(RequestHead, ContentLengthOverTheLimitNamesTheLimit) {
  const HeadVerdict v = check(post("Content-Length: 1001\r\n"));
  EXPECT_EQ(v.status, 413);
  EXPECT_EQ(v.message, "the request body is larger than the limit of 1000 bytes");
  EXPECT_EQ(check(post("Content-Length: 99999999999999999999999\r\n")).status, 400);  // overflows
  EXPECT_EQ(check(post("Content-Length: 5\r\nContent-Length: 5\r\n")).status, 400);
  EXPECT_EQ(check(post("Content-Length: -1\r\n")).status, 400);
  EXPECT_EQ(check(post("Content-Length: +1\r\n")).status, 400);
}

TEST(RequestHead, CompressedBodiesAreRefused) {
  const HeadVerdict v = check(post("Content-Length: 10\r\nContent-Encoding: gzip\r\n"));
  EXPECT_EQ(v.status, 415);
  EXPECT_EQ(v.message, "compressed request bodies are not accepted (Content-Encoding: gzip)");
  EXPECT_EQ(check(post("Content-Length: 10\r\nContent-Encoding: identity\r\n")).status, 0);
}

TEST(RequestHead, BodyOnARouteThatTakesNoneIsRefusedUnread) {
  HeadVerdict v = check("POST /health HTTP/1.1\r\nHost: localhost\r\nContent-Length: 5\r\n\r\n");
  EXPECT_EQ(v.status, 404);
  EXPECT_EQ(v.message, "no such endpoint: POST /health");
  v = check("GET /health HTTP/1.1\r\nHost: localhost\r\nContent-Length: 5\r\n\r\n");
  EXPECT_EQ(v.status, 400);
  EXPECT_EQ(v.message, "GET /health takes no request body");
  // Spelled otherwise than the route httplib decodes it to: refused too (never read on a guess).
  EXPECT_EQ(check(post("Content-Length: 5\r\n", "/v1/c%6fmpletions")).status, 404);
}

TEST(RequestHead, BodiesMustBeJson) {
  const std::string form =
      "POST /v1/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/x-www-form-urlencoded\r\n"
      "Content-Length: 9000\r\n\r\n";
  HeadVerdict v = check(form, [] {
    HeadPolicy p = policy();
    p.max_body_bytes = 8 << 20;
    return p;
  }());
  EXPECT_EQ(v.status, 415);
  EXPECT_EQ(v.message, "the request body must be JSON: send 'Content-Type: application/json'");
  EXPECT_EQ(check("POST /v1/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: text/plain\r\n\r\n").status, 415);
  EXPECT_EQ(check("POST /v1/completions HTTP/1.1\r\nHost: localhost\r\n\r\n").status, 415);
  EXPECT_EQ(
      check("POST /v1/completions HTTP/1.1\r\nHost: localhost\r\ncontent-type: Application/JSON; charset=utf-8\r\n\r\n")
          .status,
      0);
}

TEST(RequestHead, HostMustNameLoopbackWithoutAKey) {
  const auto host = [](const std::string& h, const HeadPolicy& p = policy()) {
    return check("GET /v1/models HTTP/1.1\r\nHost: " + h + "\r\n\r\n", p).status;
  };
  for (const char* ok : {"localhost", "localhost:8080", "LOCALHOST:1", "127.0.0.1:8080", "127.9.8.7", "[::1]:8080",
                         "app.localhost:3000"})
    EXPECT_EQ(host(ok), 0) << ok;
  for (const char* bad : {"evil.example:8080", "127.0.0.1.evil.example", "127.0.0.256", "10.0.0.1", "[::2]:80", ""})
    EXPECT_EQ(host(bad), 403) << bad;
  EXPECT_EQ(check_head("GET / HTTP/1.1\r\n\r\n", policy()).status, 400);  // HTTP/1.1 needs a Host
  EXPECT_EQ(check_head("GET / HTTP/1.0\r\n\r\n", policy()).status, 403);  // no name to check
  HeadPolicy keyed = policy();
  keyed.check_host = false;
  EXPECT_EQ(check_head("GET / HTTP/1.0\r\n\r\n", keyed).status, 0);
  EXPECT_EQ(host("evil.example:8080", keyed), 0);
  HeadPolicy bound = policy();
  bound.extra_hosts = {"my-box"};
  EXPECT_EQ(host("my-box:8080", bound), 0);
}

TEST(RequestHead, OriginMustBeTheServersOwnOrAllowed) {
  const auto origin = [](const std::string& o, const HeadPolicy& p = policy()) {
    return check(post("Origin: " + o + "\r\n"), p);
  };
  EXPECT_EQ(origin("http://127.0.0.1:8080").status, 0);  // the chat page it serves
  const HeadVerdict v = origin("https://evil.example");
  EXPECT_EQ(v.status, 403);
  EXPECT_EQ(v.message, "requests from pages of origin 'https://evil.example' are not allowed (see --cors-origin)");
  EXPECT_EQ(origin("http://127.0.0.1:3000").status, 403);  // another local site
  EXPECT_EQ(origin("null").status, 403);                   // a sandboxed page
  HeadPolicy p = policy();
  p.cors_origins = {"https://app.example"};
  EXPECT_EQ(origin("https://app.example", p).status, 0);
  EXPECT_EQ(origin("https://evil.example", p).status, 403);
  p.cors_origins = {"*"};
  EXPECT_EQ(origin("https://evil.example", p).status, 0);
}

TEST(RequestHead, AmbiguousFramingIsRefused) {
  EXPECT_EQ(check_head("GET / HTTP/1.1\nHost: localhost\r\n\r\n", policy()).status, 400);  // bare LF
  EXPECT_EQ(check_head("GET / HTTP/1.1\r\nHost: local\rhost\r\n\r\n", policy()).status, 400);
  EXPECT_EQ(check(post("Content-Length : 5\r\n")).status, 400);  // space before the colon
  EXPECT_EQ(check(post("X-A: 1\r\n b\r\n")).status, 400);        // folded
  EXPECT_EQ(check("GET  / HTTP/1.1\r\nHost: localhost\r\n\r\n").status, 400);
  EXPECT_EQ(check("GET / HTTP/2.0\r\nHost: localhost\r\n\r\n").status, 505);
  EXPECT_EQ(check(post("Host: localhost\r\n")).status, 400);  // two Hosts
}

TEST(RequestHead, RefusalIsAWholeResponseThatCloses) {
  const std::string r = refusal_response(411, "no chunks");
  EXPECT_EQ(r.rfind("HTTP/1.1 411 Length Required\r\n", 0), 0u) << r;
  EXPECT_NE(r.find("\r\nConnection: close\r\n"), std::string::npos);
  const std::string body = R"({"error":{"code":411,"message":"no chunks","type":"invalid_request_error"}})";
  EXPECT_NE(r.find("Content-Length: " + std::to_string(body.size()) + "\r\n"), std::string::npos) << r;
  EXPECT_TRUE(r.ends_with("\r\n\r\n" + body)) << r;
}

}  // namespace
}  // namespace weft::serve
