#pragma once

#include <string>
#include <utility>
#include <variant>

namespace prfaas::engine {

/// A failure with a human-readable message naming what went wrong and where,
/// e.g. "kv chunk 3 (layer 2): checksum mismatch".
struct error {
  std::string message;
};

/// Value-or-error return type for everything that consumes untrusted input.
/// C++20 has no std::expected; this is the minimal subset we need. Bad input
/// never throws out of the engine library: it comes back as an `error`.
template <class T> class [[nodiscard]] result {
public:
  result(T value) : v_(std::move(value)) {}
  result(error err) : v_(std::move(err)) {}

  bool ok() const noexcept { return v_.index() == 0; }
  explicit operator bool() const noexcept { return ok(); }

  /// Precondition: ok().
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

  /// Precondition: !ok().
  const error& err() const { return std::get<1>(v_); }
  const std::string& message() const { return err().message; }

private:
  std::variant<T, error> v_;
};

/// `result<void>`: success or an error.
template <> class [[nodiscard]] result<void> {
public:
  result() = default;
  result(error err) : err_(std::move(err)), failed_(true) {}

  bool ok() const noexcept { return !failed_; }
  explicit operator bool() const noexcept { return ok(); }
  const error& err() const { return err_; }
  const std::string& message() const { return err_.message; }

private:
  error err_;
  bool failed_ = false;
};

/// Shorthand for building an error result.
inline error make_error(std::string message) {
  return error{std::move(message)};
}

} // namespace prfaas::engine
