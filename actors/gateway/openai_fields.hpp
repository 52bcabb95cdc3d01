#pragma once

// Reading one field of an OpenAI request body: present and null mean "not given";
// anything else must have the right type and range, or the request is refused with a
// 400 naming the field (api_error::param). openai.cpp builds the request from these.

#include <cstdint>
#include <optional>
#include <string>

#include "gateway/openai.hpp"

namespace prfaas::serving::openai_fields {

/// A 400 for `param`.
api_error bad(std::string message, std::string param = {});
/// "null", "boolean", "number", "string", "array" or "object".
const char* type_name(const json& v);
/// An integer in [min, max] into `out`.
std::optional<api_error> read_uint(const json& body, const char* key, uint64_t min, uint64_t max,
                                   uint64_t& out);
/// `v` as printf's %g writes it.
std::string number_text(double v);
/// A finite number in [min, max] into `out`.
std::optional<api_error> read_number(const json& body, const char* key, double min, double max,
                                     float& out);
std::optional<api_error> read_flag(const json& body, const char* key, bool& out);
std::optional<api_error> read_string(const json& body, const char* key, std::string& out);

} // namespace prfaas::serving::openai_fields
