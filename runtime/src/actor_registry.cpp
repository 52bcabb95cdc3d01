#include "prfaas/runtime/actor_registry.hpp"

#include <fmt/format.h>

#include <mutex>
#include <set>
#include <stdexcept>

namespace prfaas {

namespace {

const char* kind_name(param_kind k) {
  switch (k) {
  case param_kind::string:
    return "a string";
  case param_kind::integer:
    return "an integer";
  case param_kind::number:
    return "a number";
  case param_kind::boolean:
    return "a boolean";
  case param_kind::duration:
    return "a duration (e.g. 200ms)";
  case param_kind::bytes:
    return "a size (e.g. 64MiB)";
  case param_kind::rate:
    return "a rate (e.g. 1gbit)";
  case param_kind::any:
    return "anything";
  }
  return "?";
}

/// Returns an empty string when `v` (a valid integer or number) is within the spec's
/// bounds, else the reason.
std::string check_bounds(const YAML::Node& v, const param_spec& s) {
  if ((!s.min && !s.max) || (s.kind != param_kind::integer && s.kind != param_kind::number))
    return {};
  const double x = v.as<double>();
  auto text = [](double d) { return fmt::format("{}", d); };
  if (s.min && s.max && (x < *s.min || x > *s.max))
    return "must be between " + text(*s.min) + " and " + text(*s.max);
  if (s.min && x < *s.min)
    return *s.min == 0 ? "must not be negative" : "must be at least " + text(*s.min);
  if (s.max && x > *s.max)
    return "must be at most " + text(*s.max);
  return {};
}

/// Returns an empty string when `v` is a valid `k`, else the reason.
std::string check_kind(const YAML::Node& v, param_kind k) {
  if (k == param_kind::any)
    return {};
  if (!v.IsScalar())
    return std::string{"expected "} + kind_name(k) + ", got a " +
           (v.IsMap() ? "mapping" : "sequence");
  auto text = v.Scalar();
  try {
    switch (k) {
    case param_kind::string:
      return {};
    case param_kind::integer:
      v.as<int64_t>();
      return {};
    case param_kind::number:
      v.as<double>();
      return {};
    case param_kind::boolean:
      v.as<bool>();
      return {};
    case param_kind::duration:
      parse_duration(text);
      return {};
    case param_kind::bytes:
      parse_bytes(text);
      return {};
    case param_kind::rate:
      parse_rate(text);
      return {};
    case param_kind::any:
      return {};
    }
  } catch (const std::exception&) {
  }
  return std::string{"expected "} + kind_name(k) + ", got \"" + text + "\"";
}

std::vector<detail::registration_fn>& builtin_list() {
  static std::vector<detail::registration_fn> fns;
  return fns;
}

} // namespace

namespace detail {

bool add_builtin_registration(registration_fn fn) {
  builtin_list().push_back(fn);
  return true;
}

} // namespace detail

actor_params::actor_params(std::string path, std::map<std::string, YAML::Node> values,
                           const std::vector<param_spec>* specs)
    : path_(std::move(path)), values_(std::move(values)), specs_(specs) {}

const YAML::Node& actor_params::get(const std::string& name) const {
  auto i = values_.find(name);
  if (i == values_.end())
    throw config_error(path_ + "." + name, "parameter not declared by the actor type");
  return i->second;
}

bool actor_params::has(const std::string& name) const {
  auto i = values_.find(name);
  return i != values_.end() && i->second.IsDefined() && !i->second.IsNull();
}

std::string actor_params::str(const std::string& name) const {
  return get(name).as<std::string>();
}
int64_t actor_params::integer(const std::string& name) const {
  return get(name).as<int64_t>();
}
double actor_params::number(const std::string& name) const {
  return get(name).as<double>();
}
bool actor_params::boolean(const std::string& name) const {
  return get(name).as<bool>();
}
duration actor_params::dur(const std::string& name) const {
  return parse_duration(get(name).Scalar());
}
uint64_t actor_params::bytes(const std::string& name) const {
  return parse_bytes(get(name).Scalar());
}
uint64_t actor_params::rate(const std::string& name) const {
  return parse_rate(get(name).Scalar());
}
YAML::Node actor_params::raw(const std::string& name) const {
  auto i = values_.find(name);
  return i == values_.end() ? YAML::Node{} : i->second;
}

void actor_registry::add(actor_type t) {
  if (t.name.empty())
    throw std::invalid_argument("actor type without a name");
  if (!t.factory)
    throw std::invalid_argument("actor type " + t.name + " has no factory");
  auto name = t.name;
  if (!types_.emplace(name, std::move(t)).second)
    throw std::invalid_argument("actor type " + name + " registered twice");
}

const actor_type* actor_registry::find(const std::string& name) const {
  auto i = types_.find(name);
  return i == types_.end() ? nullptr : &i->second;
}

std::vector<std::string> actor_registry::names() const {
  std::vector<std::string> out;
  for (auto& [n, _] : types_)
    out.push_back(n);
  return out;
}

actor_params actor_registry::params_for(const actor_config& a) const {
  auto* t = find(a.type);
  if (!t) {
    std::string known;
    for (auto& n : names())
      known += (known.empty() ? "" : ", ") + n;
    throw config_error(a.path + ".type",
                       "unknown actor type \"" + a.type + "\" (known: " + known + ")");
  }
  std::map<std::string, YAML::Node> values;
  std::set<std::string> declared;
  for (auto& spec : t->params)
    declared.insert(spec.name);
  if (a.params && a.params.IsMap()) {
    for (auto it = a.params.begin(); it != a.params.end(); ++it) {
      auto key = it->first.as<std::string>();
      if (!declared.count(key)) {
        std::string expected;
        for (auto& spec : t->params)
          expected += (expected.empty() ? "" : ", ") + spec.name;
        throw config_error(a.path + "." + key, "unknown parameter for actor type " + a.type +
                                                   " (expected one of: " +
                                                   (expected.empty() ? "none" : expected) + ")");
      }
    }
  }
  for (auto& spec : t->params) {
    auto path = a.path + "." + spec.name;
    YAML::Node v;
    if (a.params && a.params.IsMap())
      for (auto it = a.params.begin(); it != a.params.end(); ++it)
        if (it->first.as<std::string>() == spec.name)
          v = it->second;
    if (!v.IsDefined() || v.IsNull()) {
      if (spec.required)
        throw config_error(path, "required parameter of actor type " + a.type + " is missing");
      if (spec.default_value.empty()) {
        values.emplace(spec.name, YAML::Node{});
        continue;
      }
      v = YAML::Load(spec.default_value);
    }
    if (auto why = check_kind(v, spec.kind); !why.empty())
      throw config_error(path, why);
    if (auto why = check_bounds(v, spec); !why.empty())
      throw config_error(path, why);
    values.emplace(spec.name, YAML::Clone(v));
  }
  return actor_params{a.path, std::move(values), &t->params};
}

void actor_registry::validate(const deployment_config& dep) const {
  for (auto& n : dep.nodes)
    for (auto& a : n.actors) {
      auto p = params_for(a);
      auto* t = find(a.type);
      if (t && t->check)
        t->check(a.path, p);
      if (t && t->check_deployment)
        t->check_deployment(a.path, p, dep);
    }
}

actor_registry actor_registry::with_builtins() {
  actor_registry r;
  for (auto fn : builtin_list())
    fn(r);
  return r;
}

} // namespace prfaas
