#pragma once

// Logs are events: `event key=value ...`, one line each, prefixed with time, level,
// node and incarnation. Loggers are per node (never the spdlog default logger), so
// several nodes in one process keep their lines apart. For log shippers the same lines
// can be JSON objects instead (set_log_format): {"time", "level", "node", "inc",
// "event", and each key=value as a string field; a quoted value unquoted}.

#include <cstdint>
#include <memory>
#include <string>

#include <spdlog/spdlog.h>

#include "prfaas/runtime/config.hpp"

namespace prfaas {

using logger_ptr = std::shared_ptr<spdlog::logger>;

enum class log_format { text, json };

/// The format of the loggers made after this call (prfaas-node --log-format).
void set_log_format(log_format f);

/// The JSON-lines formatter (one object per event, fields as described above).
std::unique_ptr<spdlog::formatter> make_json_formatter();

/// A stderr logger named `node=<name> inc=<incarnation>`; thread-safe.
logger_ptr make_node_logger(const std::string& node, uint64_t incarnation, log_level level);

/// A logger that discards everything (tests, benchmarks).
logger_ptr make_null_logger();

spdlog::level::level_enum to_spdlog(log_level);

} // namespace prfaas
