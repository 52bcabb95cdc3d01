// Values with units in deployment files: durations, sizes, rates, log levels.

#include "prfaas/runtime/config.hpp"
#include "config_units.hpp"

#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace prfaas {

// -- numbers with units -------------------------------------------------------------------------

namespace detail {

std::optional<decimal> split_decimal(std::string_view text) {
  size_t i = 0;
  while (i < text.size() && is_digit(text[i]))
    ++i;
  if (i == 0)
    return std::nullopt;
  decimal out{text.substr(0, i), {}, {}};
  if (i < text.size() && text[i] == '.') {
    size_t j = i + 1;
    while (j < text.size() && is_digit(text[j]))
      ++j;
    if (j == i + 1)
      return std::nullopt; // "1." or "1.s"
    out.fraction = text.substr(i + 1, j - i - 1);
    i = j;
  }
  out.suffix = text.substr(i);
  return out;
}

std::optional<uint64_t> scaled(const decimal& number, uint64_t factor, uint64_t max) {
  using u128 = unsigned __int128;
  // 20 digits < 2^67 and every factor < 2^44, so no intermediate overflows 128 bits.
  if (number.whole.size() > 20 || number.fraction.size() > 18)
    return std::nullopt;
  u128 whole = 0;
  for (char c : number.whole)
    whole = whole * 10 + static_cast<u128>(c - '0');
  u128 fraction = 0;
  u128 denominator = 1;
  for (char c : number.fraction) {
    fraction = fraction * 10 + static_cast<u128>(c - '0');
    denominator *= 10;
  }
  if (fraction * factor % denominator != 0)
    return std::nullopt;
  u128 value = whole * factor + fraction * factor / denominator;
  if (value > max)
    return std::nullopt;
  return static_cast<uint64_t>(value);
}

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size())
    return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i])))
      return false;
  return true;
}

std::optional<uint64_t> parse_with_units(std::string_view text, std::initializer_list<unit> units,
                                         std::optional<uint64_t> bare, bool case_sensitive,
                                         uint64_t max) {
  auto number = split_decimal(text);
  if (!number)
    return std::nullopt;
  if (number->suffix.empty()) {
    if (!bare)
      return std::nullopt;
    return scaled(*number, *bare, max);
  }
  for (const auto& u : units) {
    bool match = case_sensitive ? u.name == number->suffix : iequals(u.name, number->suffix);
    if (match)
      return scaled(*number, u.factor, max);
  }
  return std::nullopt;
}

} // namespace detail

using namespace detail;

namespace {

constexpr uint64_t ns_per_s = 1'000'000'000;

} // namespace

duration parse_duration(const std::string& text) {
  if (text == "0")
    return duration::zero();
  auto ns = parse_with_units(text,
                             {{"ns", 1},
                              {"us", 1'000},
                              {"ms", 1'000'000},
                              {"s", ns_per_s},
                              {"m", 60 * ns_per_s},
                              {"h", 3600 * ns_per_s}},
                             std::nullopt, true,
                             static_cast<uint64_t>(std::numeric_limits<duration::rep>::max()));
  if (!ns)
    throw std::invalid_argument("invalid duration \"" + text +
                                "\" (expected a non-negative number and a unit: ns, us, ms, "
                                "s, m or h; e.g. 200ms, 1.5s)");
  return duration{static_cast<duration::rep>(*ns)};
}

uint64_t parse_bytes(const std::string& text) {
  constexpr uint64_t k = 1000;
  auto bytes = parse_with_units(text,
                                {{"B", 1},
                                 {"KB", k},
                                 {"MB", k * k},
                                 {"GB", k * k * k},
                                 {"TB", k * k * k * k},
                                 {"KiB", uint64_t{1} << 10},
                                 {"MiB", uint64_t{1} << 20},
                                 {"GiB", uint64_t{1} << 30},
                                 {"TiB", uint64_t{1} << 40}},
                                1, false, std::numeric_limits<uint64_t>::max());
  if (!bytes)
    throw std::invalid_argument("invalid size \"" + text +
                                "\" (expected a whole number of bytes, optionally with a unit: "
                                "B, KB, MB, GB, TB, KiB, MiB, GiB, TiB; e.g. 64MiB)");
  return *bytes;
}

uint64_t parse_rate(const std::string& text) {
  constexpr uint64_t k = 1000;
  // tc(8) conventions: *bit are bits per second, *bps bytes per second; case-insensitive.
  auto bits = parse_with_units(text,
                               {{"bit", 1},
                                {"kbit", k},
                                {"mbit", k * k},
                                {"gbit", k * k * k},
                                {"tbit", k * k * k * k},
                                {"Bps", 8},
                                {"KBps", 8 * k},
                                {"MBps", 8 * k * k},
                                {"GBps", 8 * k * k * k},
                                {"TBps", 8 * k * k * k * k}},
                               1, false, std::numeric_limits<uint64_t>::max());
  if (!bits)
    throw std::invalid_argument("invalid rate \"" + text +
                                "\" (expected a number and a unit: bit, kbit, mbit, gbit, tbit "
                                "or Bps, KBps, MBps, GBps, TBps; e.g. 1gbit)");
  return *bits;
}

std::string to_string(log_level level) {
  switch (level) {
  case log_level::trace:
    return "trace";
  case log_level::debug:
    return "debug";
  case log_level::info:
    return "info";
  case log_level::warn:
    return "warn";
  case log_level::error:
    return "error";
  case log_level::off:
    return "off";
  }
  return "unknown";
}

std::string format_duration(duration d) {
  if (d == duration::zero())
    return "0s";
  auto ns = d.count();
  std::string sign;
  if (ns < 0) {
    sign = "-";
    ns = -ns;
  }
  // The largest unit that represents `d` exactly, so parse_duration(format_duration(d)) == d.
  static constexpr std::pair<int64_t, const char*> units[] = {{3600 * int64_t{ns_per_s}, "h"},
                                                              {60 * int64_t{ns_per_s}, "m"},
                                                              {int64_t{ns_per_s}, "s"},
                                                              {1'000'000, "ms"},
                                                              {1'000, "us"},
                                                              {1, "ns"}};
  for (auto [factor, name] : units)
    if (ns % factor == 0)
      return sign + std::to_string(ns / factor) + name;
  return sign + std::to_string(ns) + "ns";
}

std::string format_bytes(uint64_t bytes) {
  static constexpr std::pair<uint64_t, const char*> units[] = {{uint64_t{1} << 40, "TiB"},
                                                               {uint64_t{1} << 30, "GiB"},
                                                               {uint64_t{1} << 20, "MiB"},
                                                               {uint64_t{1} << 10, "KiB"}};
  if (bytes != 0)
    for (auto [factor, name] : units)
      if (bytes % factor == 0)
        return std::to_string(bytes / factor) + name;
  return std::to_string(bytes);
}

std::string format_rate(uint64_t bits_per_s) {
  static constexpr std::pair<uint64_t, const char*> units[] = {
      {1'000'000'000'000, "tbit"}, {1'000'000'000, "gbit"}, {1'000'000, "mbit"}, {1'000, "kbit"}};
  if (bits_per_s != 0)
    for (auto [factor, name] : units)
      if (bits_per_s % factor == 0)
        return std::to_string(bits_per_s / factor) + name;
  return std::to_string(bits_per_s) + "bit";
}

} // namespace prfaas
