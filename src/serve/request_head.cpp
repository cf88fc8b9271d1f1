#include "serve/request_head.h"

#include "serve/http_error.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <optional>

namespace weft::serve {

namespace {

constexpr size_t kMaxEcho = 64;  // bytes of a bad header value a refusal quotes

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::string echo(std::string_view s) {
  return s.size() <= kMaxEcho ? std::string(s) : std::string(s.substr(0, kMaxEcho)) + "...";
}

bool is_tchar(char c) {  // RFC 9110's token characters
  return std::isalnum(static_cast<unsigned char>(c)) ||
         std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

bool is_token(std::string_view s) { return !s.empty() && std::all_of(s.begin(), s.end(), is_tchar); }

// The host part of a Host value ("name:port", "[v6]:port"), lowercased.
std::string host_name(std::string_view host) {
  if (!host.empty() && host.front() == '[') return lower(host.substr(0, host.find(']') + 1));
  return lower(host.substr(0, host.find(':')));
}

bool is_loopback_name(const std::string& name) {
  if (name == "localhost" || name.ends_with(".localhost") || name == "[::1]") return true;
  // 127.0.0.0/8, written as four decimal numbers (browsers normalise other spellings to this).
  if (!name.starts_with("127.")) return false;
  int parts = 0;
  for (size_t i = 0; i <= name.size(); ++parts) {
    const size_t dot = std::min(name.find('.', i), name.size());
    int v = -1;
    const auto [p, ec] = std::from_chars(name.data() + i, name.data() + dot, v);
    if (ec != std::errc() || p != name.data() + dot || v > 255) return false;
    i = dot + 1;
  }
  return parts == 4;
}

struct Fields {
  std::vector<std::string_view> host, content_length, transfer_encoding, content_encoding, content_type, origin;
};

std::vector<std::string_view>* field_list(Fields& f, const std::string& name) {
  if (name == "host") return &f.host;
  if (name == "content-length") return &f.content_length;
  if (name == "transfer-encoding") return &f.transfer_encoding;
  if (name == "content-encoding") return &f.content_encoding;
  if (name == "content-type") return &f.content_type;
  if (name == "origin") return &f.origin;
  return nullptr;
}

HeadVerdict refuse(int status, std::string message) { return {status, std::move(message), {}}; }

// Lines end in CRLF and hold no other control bytes but tabs: a bare LF or CR is where parsers
// disagree on where a header ends (httplib skips lines without CRLF).
bool clean_lines(std::string_view head) {
  for (size_t i = 0; i < head.size(); ++i) {
    const unsigned char c = head[i];
    if (c == '\r' && (i + 1 >= head.size() || head[i + 1] != '\n')) return false;
    if (c == '\n' && (i == 0 || head[i - 1] != '\r')) return false;
    if (c < 0x20 && c != '\t' && c != '\r' && c != '\n') return false;
    if (c == 0x7f) return false;
  }
  return true;
}

std::optional<HeadVerdict> parse_request_line(std::string_view line, Head& h) {
  const size_t sp1 = line.find(' '), sp2 = line.rfind(' ');
  if (sp1 == std::string_view::npos || sp1 == sp2) return refuse(400, "malformed request line");
  h.method = line.substr(0, sp1);
  const std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  h.version = line.substr(sp2 + 1);
  if (!is_token(h.method) || target.empty() || target.find(' ') != std::string_view::npos)
    return refuse(400, "malformed request line");
  if (h.version != "HTTP/1.1" && h.version != "HTTP/1.0")
    return refuse(h.version.starts_with("HTTP/") ? 505 : 400, fmt::format("unsupported version {}", echo(h.version)));
  h.path = target.substr(0, target.find('?'));
  return std::nullopt;
}

std::optional<HeadVerdict> parse_fields(std::string_view rest, Fields& f) {
  while (!rest.empty()) {
    const size_t eol = rest.find("\r\n");
    const std::string_view line = rest.substr(0, eol);
    rest.remove_prefix(eol + 2);
    if (line.empty()) break;
    if (line.front() == ' ' || line.front() == '\t') return refuse(400, "folded header lines are not accepted");
    const size_t colon = line.find(':');
    // No space before the colon: RFC 9112 says to refuse it (parsers disagree on such names).
    if (colon == std::string_view::npos || !is_token(line.substr(0, colon)))
      return refuse(400, fmt::format("malformed header line '{}'", echo(line)));
    if (auto* list = field_list(f, lower(line.substr(0, colon)))) list->push_back(trim(line.substr(colon + 1)));
  }
  return std::nullopt;
}

std::optional<HeadVerdict> check_framing(const Fields& f, Head& h, const HeadPolicy& p) {
  if (!f.transfer_encoding.empty()) {
    if (!f.content_length.empty())
      return refuse(400, "a request may not have both Content-Length and Transfer-Encoding");
    // httplib 0.11 reads a chunked body whole, past any limit.
    return refuse(411, "chunked request bodies are not accepted: send the body with a Content-Length");
  }
  if (f.content_length.size() > 1) return refuse(400, "more than one Content-Length");
  if (!f.content_length.empty()) {
    const std::string_view v = f.content_length[0];
    const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), h.content_length);
    if (v.empty() || ec != std::errc() || end != v.data() + v.size() || v.front() == '+')
      return refuse(400, fmt::format("malformed Content-Length '{}'", echo(v)));
  }
  for (const auto v : f.content_encoding)
    if (lower(v) != "identity")
      return refuse(415, fmt::format("compressed request bodies are not accepted (Content-Encoding: {})", echo(v)));
  const bool takes_body =
      h.method == "POST" && std::find(p.body_paths.begin(), p.body_paths.end(), h.path) != p.body_paths.end();
  if (h.content_length > 0 && !takes_body) {
    if (h.method == "POST") return refuse(404, fmt::format("no such endpoint: POST {}", echo(h.path)));
    return refuse(400, fmt::format("{} {} takes no request body", h.method, echo(h.path)));
  }
  if (h.content_length > p.max_body_bytes)
    return refuse(413, fmt::format("the request body is larger than the limit of {} bytes", p.max_body_bytes));
  if (takes_body) {
    // A body of another type is a "simple" request a page of any origin may send without a preflight.
    const std::string type =
        f.content_type.empty() ? "" : lower(trim(f.content_type[0].substr(0, f.content_type[0].find(';'))));
    if (f.content_type.size() != 1 || type != "application/json")
      return refuse(415, "the request body must be JSON: send 'Content-Type: application/json'");
  }
  return std::nullopt;
}

std::optional<HeadVerdict> check_origin(const Fields& f, const Head& h, const HeadPolicy& p) {
  if (f.host.size() > 1) return refuse(400, "more than one Host");
  if (f.host.empty() && h.version == "HTTP/1.1") return refuse(400, "an HTTP/1.1 request needs a Host header");
  const std::string host = f.host.empty() ? "" : lower(f.host[0]);
  if (p.check_host) {
    const std::string name = host_name(host);
    const bool known =
        is_loopback_name(name) || std::find(p.extra_hosts.begin(), p.extra_hosts.end(), name) != p.extra_hosts.end();
    if (!known)
      return refuse(403, fmt::format("Host '{}' is not this server's: a server without an API key answers only "
                                     "loopback names (localhost, 127.0.0.1, [::1])",
                                     echo(host)));
  }
  if (f.origin.size() > 1) return refuse(400, "more than one Origin");
  if (f.origin.empty()) return std::nullopt;
  const std::string origin = lower(f.origin[0]);
  const auto listed = [&](const std::string& o) {
    return std::find(p.cors_origins.begin(), p.cors_origins.end(), o) != p.cors_origins.end();
  };
  if (!host.empty() && (origin == "http://" + host || origin == "https://" + host)) return std::nullopt;
  if (listed("*") || listed(origin)) return std::nullopt;
  return refuse(403,
                fmt::format("requests from pages of origin '{}' are not allowed (see --cors-origin)", echo(origin)));
}

const char* reason(int status) {
  switch (status) {
    case 400: return "Bad Request";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 408: return "Request Timeout";
    case 411: return "Length Required";
    case 413: return "Content Too Large";
    case 415: return "Unsupported Media Type";
    case 431: return "Request Header Fields Too Large";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return status >= 500 ? "Server Error" : "Client Error";
  }
}

}  // namespace

size_t head_end(std::string_view bytes) {
  const size_t at = bytes.find("\r\n\r\n");
  return at == std::string_view::npos ? at : at + 4;
}

HeadVerdict check_head(std::string_view head, const HeadPolicy& policy) {
  if (!clean_lines(head)) return refuse(400, "the request head has a bare CR or LF, or a control byte");
  HeadVerdict v;
  Head& h = v.head;
  h.head_bytes = head.size();
  const size_t eol = head.find("\r\n");
  if (auto r = parse_request_line(head.substr(0, eol), h)) return *r;
  Fields f;
  if (auto r = parse_fields(head.substr(eol + 2), f)) return *r;
  if (auto r = check_origin(f, h, policy)) return *r;
  if (auto r = check_framing(f, h, policy)) return *r;
  return v;
}

std::string refusal_response(int status, const std::string& message) {
  const std::string body = dump(error_body(status, message));
  return fmt::format(
      "HTTP/1.1 {} {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{}", status,
      reason(status), body.size(), body);
}

}  // namespace weft::serve
