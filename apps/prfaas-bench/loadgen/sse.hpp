#pragma once

// Server-sent events (WHATWG "text/event-stream"), parsed incrementally: bytes arrive in
// whatever pieces the socket hands over, and an event split across pieces comes out
// the same as if it had arrived whole.

#include <string>
#include <string_view>
#include <vector>

namespace prfaas::loadgen {

struct sse_event {
  std::string event; ///< the "event:" field; empty means "message"
  std::string data;  ///< "data:" lines joined with '\n'
  std::string id;

  bool operator==(const sse_event&) const = default;
};

class sse_parser {
public:
  /// Consumes `bytes`; each event completed by them is appended to `out`.
  void feed(std::string_view bytes, std::vector<sse_event>& out);

  /// True when bytes of an event that has not been terminated by a blank line are
  /// pending, i.e. the stream was cut mid-event if it ends now.
  bool partial() const { return !line_.empty() || pending_; }

private:
  void line(std::vector<sse_event>& out);

  std::string line_;      ///< the current line so far, without its terminator
  bool after_cr_ = false; ///< the last byte was '\r': a following '\n' ends nothing
  bool pending_ = false;  ///< fields of the current event have been seen
  bool started_ = false;  ///< past a possible leading byte-order mark
  sse_event current_;
  std::string data_; ///< data lines of the current event, each + '\n'
};

} // namespace prfaas::loadgen
