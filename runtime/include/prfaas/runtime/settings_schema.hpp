#pragma once

// One declaration per setting. A component's typed settings struct carries each
// default once, as its member initialiser; a settings_schema names each member as a
// deployment-file parameter, with its kind and doc. From that one list come the actor
// type's parameter specs (defaults rendered from a default-constructed struct, so the
// registry, `prfaas-node actor-types` and configs/sample.yaml show what the code uses)
// and the typed settings read from an instance's parameters.
//
//   struct decode_settings { uint32_t max_batch = 16; duration early_ttl = 30s; };
//   const auto& schema() {
//     static const auto s = settings_schema<decode_settings>{}
//         .param("max_batch", param_kind::integer, &decode_settings::max_batch, "...")
//         .at_least(1)
//         .param("early_ttl", param_kind::duration, &decode_settings::early_ttl, "...");
//     return s;
//   }
//   .params = schema().specs(), ... auto cfg = schema().read(params);
//
// A field is a member pointer, a member pointer's member (`&S::http, &http::threads`),
// or a callable returning a reference into the struct.

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "prfaas/runtime/actor_registry.hpp"
#include "prfaas/runtime/config.hpp"

namespace prfaas {

namespace detail {

template <class T> struct is_chrono_duration : std::false_type {};
template <class R, class P>
struct is_chrono_duration<std::chrono::duration<R, P>> : std::true_type {};

/// `value` written as a deployment file would write it for parameter kind `kind`.
template <class T> std::string render_default(param_kind kind, const T& value) {
  if constexpr (std::is_same_v<T, std::string>) {
    return value.empty() ? "\"\"" : value;
  } else if constexpr (std::is_same_v<T, bool>) {
    return value ? "true" : "false";
  } else if constexpr (is_chrono_duration<T>::value) {
    return format_duration(std::chrono::duration_cast<duration>(value));
  } else if constexpr (std::is_floating_point_v<T>) {
    return fmt::format("{}", value); // the shortest text that reads back the same
  } else {
    static_assert(std::is_integral_v<T>,
                  "a setting is a string, bool, duration, number or integer");
    if (kind == param_kind::bytes)
      return format_bytes(static_cast<uint64_t>(value));
    if (kind == param_kind::rate)
      return format_rate(static_cast<uint64_t>(value));
    return std::to_string(value);
  }
}

/// Reads parameter `name` of kind `kind` from `p` into `out`.
template <class T>
void read_setting(const actor_params& p, const std::string& name, param_kind kind, T& out) {
  if constexpr (std::is_same_v<T, std::string>) {
    out = p.str(name);
  } else if constexpr (std::is_same_v<T, bool>) {
    out = p.boolean(name);
  } else if constexpr (is_chrono_duration<T>::value) {
    out = std::chrono::duration_cast<T>(p.dur(name));
  } else if constexpr (std::is_floating_point_v<T>) {
    out = static_cast<T>(p.number(name));
  } else {
    static_assert(std::is_integral_v<T>,
                  "a setting is a string, bool, duration, number or integer");
    if (kind == param_kind::bytes)
      out = static_cast<T>(p.bytes(name));
    else if (kind == param_kind::rate)
      out = static_cast<T>(p.rate(name));
    else
      out = static_cast<T>(p.integer(name));
  }
}

} // namespace detail

template <class S> class settings_schema {
public:
  /// Declares parameter `name`, read into `field`; its default is `field` of S{}.
  template <class Field>
  settings_schema&& param(std::string name, param_kind kind, Field field, std::string doc) && {
    add(std::move(name), kind, field, std::move(doc), false);
    return std::move(*this);
  }
  /// The same for a member of a member: `&S::http, &http_settings::threads`.
  template <class Outer, class T>
  settings_schema&& param(std::string name, param_kind kind, Outer S::*outer, T Outer::*inner,
                          std::string doc) && {
    add(std::move(name), kind, member_path<Outer, T>{outer, inner}, std::move(doc), false);
    return std::move(*this);
  }
  /// Declares a parameter the deployment file must give (no default).
  template <class Field>
  settings_schema&& required(std::string name, param_kind kind, Field field, std::string doc) && {
    add(std::move(name), kind, field, std::move(doc), true);
    return std::move(*this);
  }
  /// Bounds for the parameter declared last (integer or number): the registry refuses
  /// a value outside them, naming the key.
  settings_schema&& at_least(double min) && {
    entries_.back().spec.min = min;
    return std::move(*this);
  }
  settings_schema&& between(double min, double max) && {
    entries_.back().spec.min = min;
    entries_.back().spec.max = max;
    return std::move(*this);
  }
  /// Declares a parameter the component reads itself (kind `any`, or one whose
  /// default is not a plain member): the spec as given, nothing read into S.
  settings_schema&& spec(param_spec s) && {
    entries_.push_back({std::move(s), {}});
    return std::move(*this);
  }

  /// The actor type's parameter specs, in declaration order.
  std::vector<param_spec> specs() const {
    std::vector<param_spec> out;
    out.reserve(entries_.size());
    for (auto& e : entries_)
      out.push_back(e.spec);
    return out;
  }

  /// S{} with every declared member read from `p` (defaults already filled in by the
  /// registry's validation).
  S read(const actor_params& p) const {
    S s{};
    for (auto& e : entries_)
      if (e.read)
        e.read(s, p);
    return s;
  }

private:
  template <class Outer, class T> struct member_path {
    Outer S::*outer;
    T Outer::*inner;
    T& operator()(S& s) const { return (s.*outer).*inner; }
  };

  struct entry {
    param_spec spec;
    std::function<void(S&, const actor_params&)> read;
  };

  template <class Field>
  void add(std::string name, param_kind kind, Field field, std::string doc, bool required) {
    S defaults{};
    auto& value = std::invoke(field, defaults);
    param_spec spec{name, kind, required ? "" : detail::render_default(kind, value), std::move(doc),
                    required};
    entries_.push_back({std::move(spec), [name, kind, field](S& s, const actor_params& p) {
                          detail::read_setting(p, name, kind, std::invoke(field, s));
                        }});
  }

  std::vector<entry> entries_;
};

} // namespace prfaas
