#pragma once

// Internal to the config loader: exact decimal numbers with unit suffixes, shared by
// config_units.cpp (durations, sizes, rates) and config.cpp (integers, ports).

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string_view>

namespace prfaas::detail {

struct unit {
  std::string_view name;
  uint64_t factor;
};

/// "1.5GiB" split into its decimal number and its suffix.
struct decimal {
  std::string_view whole;
  std::string_view fraction;
  std::string_view suffix;
};

inline bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

std::optional<decimal> split_decimal(std::string_view text);

/// `number * factor`, exactly: nothing when the result exceeds `max` or is not whole.
std::optional<uint64_t> scaled(const decimal& number, uint64_t factor, uint64_t max);

bool iequals(std::string_view a, std::string_view b);

/// Parses `text` as a decimal number followed by one of `units`; `bare` is the factor
/// of a number without a unit (nothing: a unit is required).
std::optional<uint64_t> parse_with_units(std::string_view text, std::initializer_list<unit> units,
                                         std::optional<uint64_t> bare, bool case_sensitive,
                                         uint64_t max);

} // namespace prfaas::detail
