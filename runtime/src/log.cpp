#include "prfaas/runtime/log.hpp"

#include <spdlog/sinks/null_sink.h>
#include <spdlog/sinks/stdout_sinks.h>

namespace prfaas {

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
