#include "gateway/openai_fields.hpp"

#include <cmath>
#include <cstdio>

namespace prfaas::serving::openai_fields {

api_error bad(std::string message, std::string param) {
  return api_error{.status = 400, .message = std::move(message), .param = std::move(param)};
}

const char* type_name(const json& v) {
  return v.type_name(); // "null", "boolean", "number", "string", "array", "object"
}

std::optional<api_error> read_uint(const json& body, const char* key, uint64_t min, uint64_t max,
                                   uint64_t& out) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null())
    return std::nullopt;
  if (!it->is_number_integer())
    return bad(std::string{key} + " must be an integer, got " + type_name(*it), key);
  if (it->is_number_unsigned()) {
    auto v = it->get<uint64_t>();
    if (v < min || v > max)
      return bad(std::string{key} + " must be between " + std::to_string(min) + " and " +
                     std::to_string(max) + ", got " + std::to_string(v),
                 key);
    out = v;
    return std::nullopt;
  }
  auto v = it->get<int64_t>();
  if (v < 0 || static_cast<uint64_t>(v) < min || static_cast<uint64_t>(v) > max)
    return bad(std::string{key} + " must be between " + std::to_string(min) + " and " +
                   std::to_string(max) + ", got " + std::to_string(v),
               key);
  out = static_cast<uint64_t>(v);
  return std::nullopt;
}

std::string number_text(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

std::optional<api_error> read_number(const json& body, const char* key, double min, double max,
                                     float& out) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null())
    return std::nullopt;
  if (!it->is_number())
    return bad(std::string{key} + " must be a number, got " + type_name(*it), key);
  const double v = it->get<double>();
  if (!std::isfinite(v) || v < min || v > max)
    return bad(std::string{key} + " must be between " + number_text(min) + " and " +
                   number_text(max) + ", got " + safe_dump(*it),
               key);
  out = static_cast<float>(v);
  return std::nullopt;
}

std::optional<api_error> read_flag(const json& body, const char* key, bool& out) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null())
    return std::nullopt;
  if (!it->is_boolean())
    return bad(std::string{key} + " must be a boolean, got " + type_name(*it), key);
  out = it->get<bool>();
  return std::nullopt;
}

std::optional<api_error> read_string(const json& body, const char* key, std::string& out) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null())
    return std::nullopt;
  if (!it->is_string())
    return bad(std::string{key} + " must be a string, got " + type_name(*it), key);
  out = it->get<std::string>();
  return std::nullopt;
}

} // namespace prfaas::serving::openai_fields
