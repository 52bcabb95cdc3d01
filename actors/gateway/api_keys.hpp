#pragma once

// API keys on the gateway: who may call /v1/*, and how many requests each key may
// have in flight. Plain C++, no sockets (tests/unit/security/test_api_keys.cpp).
//
// A client sends `Authorization: Bearer <key>`. Without keys configured the gateway
// is open, as before. A missing or unknown key is 401 in OpenAI's error shape
// (code "invalid_api_key"); a key over its concurrency limit is 429 with Retry-After.
// Keys are compared in time independent of where they first differ, so response
// times do not leak a key byte by byte.

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "gateway/openai.hpp"

namespace prfaas::serving {

/// Holds one of a key's concurrency slots; releases it when destroyed.
using api_slot = std::shared_ptr<void>;

class api_key_guard {
public:
  /// `keys` empty: no authentication. `max_concurrent_per_key` 0: no per-key limit.
  api_key_guard(std::vector<std::string> keys, uint32_t max_concurrent_per_key);

  bool enabled() const { return !keys_.empty(); }

  /// The key an `Authorization` header value carries, if it is a configured one.
  /// Otherwise the 401 to send (message says whether the key was missing or wrong).
  std::variant<std::string, api_error> authenticate(std::string_view authorization) const;

  /// A concurrency slot of `key`, or the 429 when it has `max_concurrent_per_key`
  /// requests in flight. Without authentication every request shares one key, "".
  std::variant<api_slot, api_error> acquire(const std::string& key);

  /// Requests in flight for `key`.
  uint32_t in_flight(const std::string& key) const;

private:
  std::vector<std::string> keys_;
  uint32_t max_per_key_;
  std::shared_ptr<std::mutex> mtx_ = std::make_shared<std::mutex>();
  std::shared_ptr<std::map<std::string, uint32_t>> counts_ =
      std::make_shared<std::map<std::string, uint32_t>>();
};

/// Keys from a file: one per line; blank lines and lines starting with '#' skipped,
/// surrounding white space trimmed. Throws std::runtime_error naming the file.
std::vector<std::string> read_api_keys_file(const std::string& file);

} // namespace prfaas::serving
