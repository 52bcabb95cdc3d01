#include "loadgen/sse.hpp"

namespace prfaas::loadgen {

void sse_parser::feed(std::string_view bytes, std::vector<sse_event>& out) {
  for (char c : bytes) {
    if (!started_) {
      // A UTF-8 byte-order mark may open the stream; it is dropped byte by byte so a
      // split BOM is handled like any other split.
      static constexpr std::string_view bom = "\xEF\xBB\xBF";
      if (line_.size() < bom.size() && c == bom[line_.size()] && !pending_) {
        line_.push_back(c);
        if (line_.size() == bom.size()) {
          line_.clear();
          started_ = true;
        }
        continue;
      }
      started_ = true; // not a BOM after all: keep what was held back as text
    }
    if (c == '\n' && after_cr_) {
      after_cr_ = false; // the second half of "\r\n"
      continue;
    }
    after_cr_ = c == '\r';
    if (c == '\r' || c == '\n')
      line(out);
    else
      line_.push_back(c);
  }
}

void sse_parser::line(std::vector<sse_event>& out) {
  std::string l;
  l.swap(line_);
  if (l.empty()) {
    // Blank line: dispatch. An event with no data is dropped, as the standard says.
    if (!data_.empty()) {
      data_.pop_back();
      current_.data = std::move(data_);
      out.push_back(std::move(current_));
    }
    current_ = {};
    data_.clear();
    pending_ = false;
    return;
  }
  pending_ = true;
  if (l[0] == ':')
    return; // comment (keep-alive)
  auto colon = l.find(':');
  std::string_view field{l}, value;
  if (colon != std::string::npos) {
    field = std::string_view{l}.substr(0, colon);
    value = std::string_view{l}.substr(colon + 1);
    if (!value.empty() && value[0] == ' ')
      value.remove_prefix(1);
  }
  if (field == "data") {
    data_.append(value);
    data_.push_back('\n');
  } else if (field == "event") {
    current_.event = value;
  } else if (field == "id") {
    if (value.find('\0') == std::string_view::npos)
      current_.id = value;
  }
  // "retry" and unknown fields are ignored.
}

} // namespace prfaas::loadgen
