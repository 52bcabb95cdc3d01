#include "gateway/api_keys.hpp"

#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <stdexcept>

namespace prfaas::serving {

namespace {

/// Equal without an early exit: the time taken depends on the lengths only.
bool same_key(std::string_view a, std::string_view b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size(); ++i)
    diff |= static_cast<unsigned char>(a[i] ^ b[i % (b.empty() ? 1 : b.size())]);
  return diff == 0 && !b.empty();
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

/// Gives a key's slot back when the last holder lets go.
struct slot_release {
  std::shared_ptr<std::mutex> mtx;
  std::shared_ptr<std::map<std::string, uint32_t>> counts;
  std::string key;

  slot_release(std::shared_ptr<std::mutex> m, std::shared_ptr<std::map<std::string, uint32_t>> c,
               std::string k)
      : mtx(std::move(m)), counts(std::move(c)), key(std::move(k)) {}
  slot_release(const slot_release&) = delete;
  slot_release& operator=(const slot_release&) = delete;
  ~slot_release() {
    std::lock_guard<std::mutex> guard{*mtx};
    if (auto i = counts->find(key); i != counts->end() && --i->second == 0)
      counts->erase(i);
  }
};

api_error unauthorized(std::string message) {
  return api_error{.status = 401, .message = std::move(message), .code = "invalid_api_key"};
}

} // namespace

api_key_guard::api_key_guard(std::vector<std::string> keys, uint32_t max_concurrent_per_key)
    : keys_(std::move(keys)), max_per_key_(max_concurrent_per_key) {}

std::variant<std::string, api_error>
api_key_guard::authenticate(std::string_view authorization) const {
  if (!enabled())
    return std::string{};
  auto value = trim(authorization);
  constexpr std::string_view scheme = "Bearer ";
  if (value.empty())
    return unauthorized("You didn't provide an API key. Send it as 'Authorization: Bearer <key>'.");
  // The scheme is case-insensitive (RFC 7235).
  bool bearer = value.size() > scheme.size();
  for (size_t i = 0; bearer && i < scheme.size(); ++i)
    bearer = std::tolower(static_cast<unsigned char>(value[i])) ==
             std::tolower(static_cast<unsigned char>(scheme[i]));
  if (!bearer)
    return unauthorized("The Authorization header must be 'Bearer <key>'.");
  auto presented = trim(value.substr(scheme.size()));
  bool found = false;
  std::string match;
  for (const auto& k : keys_) // every key is compared: no early exit on a match either
    if (same_key(presented, k)) {
      found = true;
      match = k;
    }
  if (!found)
    return unauthorized("Incorrect API key provided.");
  return match;
}

std::variant<api_slot, api_error> api_key_guard::acquire(const std::string& key) {
  std::lock_guard<std::mutex> guard{*mtx_};
  auto& n = (*counts_)[key];
  if (max_per_key_ > 0 && n >= max_per_key_)
    return api_error{.status = 429,
                     .message = "this API key has " + std::to_string(n) +
                                " requests in flight, the most it may have; retry later",
                     .type = "rate_limit_error",
                     .retry_after_s = 1};
  ++n;
  // The slot shares the counters, so it may outlive the guard (a stream still open
  // while the gateway stops).
  return api_slot{std::make_shared<slot_release>(mtx_, counts_, key)};
}

uint32_t api_key_guard::in_flight(const std::string& key) const {
  std::lock_guard<std::mutex> guard{*mtx_};
  auto i = counts_->find(key);
  return i == counts_->end() ? 0 : i->second;
}

std::vector<std::string> read_api_keys_file(const std::string& file) {
  std::ifstream in{file};
  if (!in)
    throw std::runtime_error("cannot read API keys file " + file + ": " + std::strerror(errno));
  std::vector<std::string> keys;
  std::string line;
  while (std::getline(in, line)) {
    auto k = trim(line);
    if (!k.empty() && k.front() != '#')
      keys.emplace_back(k);
  }
  return keys;
}

} // namespace prfaas::serving
