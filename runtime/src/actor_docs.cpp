#include "prfaas/runtime/actor_docs.hpp"

#include <sstream>
#include <stdexcept>
#include <vector>

#include <fmt/format.h>

namespace prfaas {

namespace {

/// Appends `text` word by word after `head`, breaking lines at `width` columns; the
/// continuation lines start with `indent`.
void wrap(std::string& out, const std::string& head, const std::string& text,
          const std::string& indent, size_t width) {
  std::string line = head;
  std::istringstream words{text};
  std::string word;
  bool first = true;
  while (words >> word) {
    const bool fits = line.size() + 1 + word.size() <= width;
    if (!first && !fits) {
      out += line + "\n";
      line = indent + word;
    } else {
      line += (line.empty() || line.back() == ' ' ? "" : " ") + word;
    }
    first = false;
  }
  out += line + "\n";
}

std::string shown_default(const param_spec& p) {
  if (p.required)
    return "(required)";
  if (!p.default_value.empty())
    return p.default_value;
  return p.kind == param_kind::string ? "\"\"" : "(none)";
}

/// The parameter's bounds as its doc ends with them, if it has any.
std::string shown_bounds(const param_spec& p) {
  auto text = [](double d) { return fmt::format("{}", d); };
  if (p.min && p.max)
    return " (" + text(*p.min) + " to " + text(*p.max) + ")";
  if (p.min)
    return *p.min == 0 ? " (not negative)" : " (at least " + text(*p.min) + ")";
  if (p.max)
    return " (at most " + text(*p.max) + ")";
  return {};
}

/// Where the marker lines are: [begin line end, end line start) in `text`.
std::pair<size_t, size_t> block_bounds(const std::string& text) {
  auto b = text.find(actor_types_begin);
  auto e = text.find(actor_types_end);
  if (b == std::string::npos || e == std::string::npos || e < b)
    throw std::runtime_error(std::string{"no generated actor-types block (a line with \""} +
                             actor_types_begin + "\", then one with \"" + actor_types_end + "\")");
  auto after_begin = text.find('\n', b);
  auto end_line = text.rfind('\n', e);
  if (after_begin == std::string::npos || end_line == std::string::npos || end_line < after_begin)
    throw std::runtime_error("the actor-types markers must be on lines of their own");
  return {after_begin + 1, end_line + 1};
}

} // namespace

std::string describe_actor_types(const actor_registry& r, const std::string& prefix, size_t width) {
  std::string out;
  for (auto& name : r.names()) {
    const actor_type* t = r.find(name);
    wrap(out, prefix + "   " + name + ":", t->doc, prefix + "     ", width);
    for (auto& p : t->params)
      wrap(out, prefix + "     " + p.name + ": " + shown_default(p) + " ",
           "— " + p.doc + shown_bounds(p), prefix + "         ", width);
  }
  return out;
}

std::string replace_actor_types(const std::string& text, const std::string& block) {
  auto [from, to] = block_bounds(text);
  return text.substr(0, from) + block + text.substr(to);
}

std::string extract_actor_types(const std::string& text) {
  auto [from, to] = block_bounds(text);
  return text.substr(from, to - from);
}

} // namespace prfaas
