// A request's head (request line and headers) judged before any of its body is read: framing
// httplib 0.11 cannot bound (chunked or compressed bodies: it reads or inflates them whole, past
// the body limit), bodies on routes that take none, and requests a page of another origin could
// make (a non-JSON body needs no CORS preflight; a rebound DNS name reaches a loopback server).
// Pure: no I/O, so the gate's every rule is tested as a function.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace weft::serve {

// Heads longer than this are refused (431): nginx's default buffers hold 4 x 8 KiB.
constexpr size_t kMaxHeadBytes = 16 << 10;

struct HeadPolicy {
  size_t max_body_bytes = 8u << 20;
  // No API key protects the server: Host must name this machine by a loopback name or address
  // (DNS rebinding), and a browser's Origin must be the server's own or an allowed one.
  bool check_host = true;
  std::vector<std::string> extra_hosts;   // host names besides the loopback ones (the one bound to)
  std::vector<std::string> cors_origins;  // origins besides the server's own; "*": any
  std::vector<std::string> body_paths;    // the POST routes that read a (JSON) body
};

struct Head {
  std::string method, path, version;  // path: the target before any '?'
  uint64_t content_length = 0;
  size_t head_bytes = 0;  // request line and headers, the blank line included
};

struct HeadVerdict {
  int status = 0;  // 0: accepted; else the refusal's status
  std::string message;
  Head head;
};

// Bytes up to and including the blank line that ends the head, or npos while it is incomplete.
size_t head_end(std::string_view bytes);
// `head`: the bytes up to head_end().
HeadVerdict check_head(std::string_view head, const HeadPolicy& policy);
// A whole HTTP/1.1 response with an OpenAI-style error body that closes the connection.
std::string refusal_response(int status, const std::string& message);

}  // namespace weft::serve
