#include "prfaas/runtime/log.hpp"

#include <algorithm>
#include <atomic>
#include <vector>

#include <spdlog/sinks/null_sink.h>
#include <spdlog/sinks/stdout_sinks.h>

namespace prfaas {

namespace {

std::atomic<log_format> format_{log_format::text};

/// Appends `s` as a JSON string (quotes, escapes, control characters as \uXXXX).
void append_json_string(spdlog::memory_buf_t& out, std::string_view s) {
  out.push_back('"');
  for (char c : s) {
    switch (c) {
    case '"':
      out.append(std::string_view{"\\\""});
      break;
    case '\\':
      out.append(std::string_view{"\\\\"});
      break;
    case '\n':
      out.append(std::string_view{"\\n"});
      break;
    case '\t':
      out.append(std::string_view{"\\t"});
      break;
    default:
      if (static_cast<unsigned char>(c) < 0x20) {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
        out.append(std::string_view{buf});
      } else {
        out.push_back(c);
      }
    }
  }
  out.push_back('"');
}

void append_field(spdlog::memory_buf_t& out, std::string_view key, std::string_view value) {
  out.push_back(',');
  append_json_string(out, key);
  out.push_back(':');
  append_json_string(out, value);
}

/// The next token of `rest`: up to a space, or a "quoted" run (with \" inside) whole.
std::string next_value(std::string_view& rest) {
  std::string v;
  if (!rest.empty() && rest.front() == '"') {
    size_t i = 1;
    for (; i < rest.size() && rest[i] != '"'; ++i) {
      if (rest[i] == '\\' && i + 1 < rest.size())
        ++i;
      v.push_back(rest[i]);
    }
    rest.remove_prefix(std::min(rest.size(), i + 1));
  } else {
    const auto end = rest.find(' ');
    v = std::string{rest.substr(0, end)};
    rest.remove_prefix(end == std::string_view::npos ? rest.size() : end);
  }
  return v;
}

using fields = std::vector<std::pair<std::string, std::string>>;

/// `key=value key="quoted value" ...` as JSON fields, also recorded in `seen`. A key
/// already seen is dropped when its value is the same (an event that repeats its node)
/// and kept as `arg_KEY` otherwise: JSON objects have no duplicate keys. A token without
/// `=` is kept under "text" (free prose, which events should not have, is not lost).
void append_pairs(spdlog::memory_buf_t& out, std::string_view rest, fields& seen) {
  std::string text;
  while (true) {
    rest.remove_prefix(std::min(rest.size(), rest.find_first_not_of(' ')));
    if (rest.empty())
      break;
    const auto eq = rest.find('=');
    const auto space = rest.find(' ');
    if (eq == std::string_view::npos || (space != std::string_view::npos && space < eq)) {
      text += (text.empty() ? "" : " ") + std::string{rest.substr(0, space)};
      rest.remove_prefix(space == std::string_view::npos ? rest.size() : space);
      continue;
    }
    std::string key{rest.substr(0, eq)};
    rest.remove_prefix(eq + 1);
    auto value = next_value(rest);
    auto same = std::find_if(seen.begin(), seen.end(), [&](auto& f) { return f.first == key; });
    if (same != seen.end() && same->second == value)
      continue;
    if (same != seen.end())
      key = "arg_" + key;
    append_field(out, key, value);
    seen.emplace_back(std::move(key), std::move(value));
  }
  if (!text.empty())
    append_field(out, "text", text);
}

class json_formatter final : public spdlog::formatter {
public:
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    const auto t = std::chrono::system_clock::to_time_t(msg.time);
    const auto us =
        std::chrono::duration_cast<std::chrono::microseconds>(msg.time.time_since_epoch()) %
        1000000;
    std::tm tm{};
    gmtime_r(&t, &tm);
    char stamp[40];
    std::snprintf(stamp, sizeof stamp, "%04d-%02d-%02dT%02d:%02d:%02d.%06dZ", tm.tm_year + 1900,
                  tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                  static_cast<int>(us.count()));
    dest.append(std::string_view{"{\"time\":"});
    append_json_string(dest, stamp);
    const auto level = spdlog::level::to_string_view(msg.level);
    append_field(dest, "level", std::string_view{level.data(), level.size()});
    // The logger's name is `node=NAME inc=N`: the same fields.
    fields seen{{"time", ""}, {"level", ""}, {"event", ""}, {"text", ""}};
    append_pairs(dest, std::string_view{msg.logger_name.data(), msg.logger_name.size()}, seen);
    const std::string_view payload{msg.payload.data(), msg.payload.size()};
    const auto sp = payload.find(' ');
    append_field(dest, "event", payload.substr(0, sp));
    append_pairs(dest, sp == std::string_view::npos ? std::string_view{} : payload.substr(sp),
                 seen);
    dest.append(std::string_view{"}\n"});
  }
  std::unique_ptr<spdlog::formatter> clone() const override {
    return std::make_unique<json_formatter>();
  }
};

} // namespace

void set_log_format(log_format f) {
  format_ = f;
}

std::unique_ptr<spdlog::formatter> make_json_formatter() {
  return std::make_unique<json_formatter>();
}

spdlog::level::level_enum to_spdlog(log_level l) {
  switch (l) {
  case log_level::trace:
    return spdlog::level::trace;
  case log_level::debug:
    return spdlog::level::debug;
  case log_level::info:
    return spdlog::level::info;
  case log_level::warn:
    return spdlog::level::warn;
  case log_level::error:
    return spdlog::level::err;
  case log_level::off:
    return spdlog::level::off;
  }
  return spdlog::level::info;
}

logger_ptr make_node_logger(const std::string& node, uint64_t incarnation, log_level level) {
  // One shared sink: its mutex keeps lines of several nodes in one process whole.
  static auto sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
  auto log = std::make_shared<spdlog::logger>(
      "node=" + node + " inc=" + std::to_string(incarnation), sink);
  if (format_ == log_format::json)
    log->set_formatter(make_json_formatter());
  else
    log->set_pattern("%Y-%m-%dT%H:%M:%S.%f %^%l%$ %n %v");
  log->set_level(to_spdlog(level));
  log->flush_on(spdlog::level::warn);
  return log;
}

logger_ptr make_null_logger() {
  auto log =
      std::make_shared<spdlog::logger>("null", std::make_shared<spdlog::sinks::null_sink_mt>());
  log->set_level(spdlog::level::off);
  return log;
}

} // namespace prfaas
