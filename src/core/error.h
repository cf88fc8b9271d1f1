// Errors: every failure below main() throws weft::Error, which carries as fields what a report
// needs: the layer it came from ("gguf", "net", "gloo", ...), the device it happened on (if any),
// and whether it is the device's own failure or the echo of a peer's (a collective broken by a
// dead peer). what() renders "[origin] device: message", the one line the CLI prints.
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace weft {

// Own: this is what went wrong. Peer: this side gave up because another member of its group
// failed (a broken collective, a group that cannot go on); a report prefers an Own error.
enum class Blame { Own, Peer };

class Error : public std::runtime_error {
 public:
  Error(std::string origin, std::string message, std::string device = {}, Blame blame = Blame::Own)
      : std::runtime_error(render(origin, message, device)),
        origin_(std::move(origin)),
        message_(std::move(message)),
        device_(std::move(device)),
        blame_(blame) {}
  const std::string& origin() const { return origin_; }
  const std::string& message() const { return message_; }  // without origin and device
  const std::string& device() const { return device_; }    // "cpu:0", "tcp://host:port", or ""
  Blame blame() const { return blame_; }
  // The same error, said to have happened on `device` unless it already names one.
  Error on_device(const std::string& device) const {
    return device_.empty() ? Error(origin_, message_, device, blame_) : *this;
  }

 private:
  static std::string render(const std::string& origin, const std::string& message, const std::string& device) {
    return "[" + origin + "] " + (device.empty() ? "" : device + ": ") + message;
  }
  std::string origin_, message_, device_;
  Blame blame_;
};

template <typename... Args>
[[noreturn]] void fail(const char* origin, fmt::format_string<Args...> f, Args&&... args) {
  throw Error(origin, fmt::format(f, std::forward<Args>(args)...));
}

// A failure that happened on `device` (a connection's peer, a device).
template <typename... Args>
[[noreturn]] void fail_on(const char* origin, const std::string& device, fmt::format_string<Args...> f,
                          Args&&... args) {
  throw Error(origin, fmt::format(f, std::forward<Args>(args)...), device);
}

// A failure caused by a peer's (see Blame).
template <typename... Args>
[[noreturn]] void fail_by_peer(const char* origin, fmt::format_string<Args...> f, Args&&... args) {
  throw Error(origin, fmt::format(f, std::forward<Args>(args)...), {}, Blame::Peer);
}

}  // namespace weft

// Invariant check that stays on in release builds: a broken invariant is a bug, reported, not UB.
#define WEFT_ASSERT(cond)                                                               \
  do {                                                                                  \
    if (!(cond)) ::weft::fail("assert", "{}:{}: {} failed", __FILE__, __LINE__, #cond); \
  } while (0)
