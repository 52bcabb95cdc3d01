#pragma once

// Actor types register by name with a parameter list and a factory; deployment
// files refer to them by name. In-tree types register with
// PRFAAS_REGISTER_ACTOR_TYPE at static-initialisation time; plugins register from
// their PRFAAS_PLUGIN entry point. Nothing in the runtime names a concrete type.

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <caf/actor.hpp>
#include <yaml-cpp/yaml.h>

#include "prfaas/runtime/config.hpp"

namespace prfaas {

class node_context;

enum class param_kind { string, integer, number, boolean, duration, bytes, rate, any };

/// One parameter an actor type accepts in the deployment file.
struct param_spec {
  std::string name;
  param_kind kind = param_kind::string;
  std::string default_value; ///< as it would be written in YAML; empty + required = none
  std::string doc;
  bool required = false;
  /// Bounds of an integer or number parameter, checked with its kind (the deployment
  /// is refused naming the key: "must be at least 1", "must be between 1 and 64").
  std::optional<double> min, max;
};

/// An actor instance's parameters, validated against its type's specs, with
/// defaults filled in. Accessors throw config_error for undeclared names.
class actor_params {
public:
  actor_params() = default;
  actor_params(std::string path, std::map<std::string, YAML::Node> values,
               const std::vector<param_spec>* specs);

  std::string str(const std::string& name) const;
  int64_t integer(const std::string& name) const;
  double number(const std::string& name) const;
  bool boolean(const std::string& name) const;
  duration dur(const std::string& name) const;
  uint64_t bytes(const std::string& name) const;
  uint64_t rate(const std::string& name) const;
  /// The raw YAML (kind `any`); null when absent and without default.
  YAML::Node raw(const std::string& name) const;
  bool has(const std::string& name) const;
  /// The key path of the actor these belong to (for error messages).
  const std::string& path() const { return path_; }

private:
  const YAML::Node& get(const std::string& name) const;

  std::string path_;
  std::map<std::string, YAML::Node> values_;
  const std::vector<param_spec>* specs_ = nullptr;
};

/// Spawns one instance. Called again by the supervisor for each restart.
using actor_factory = std::function<caf::actor(node_context& ctx, const std::string& name,
                                               const actor_params& params)>;

/// Checks parameter values beyond their kinds (e.g. an address list) at validation
/// time; throws config_error naming `path` + "." + parameter.
using actor_check = std::function<void(const std::string& path, const actor_params& params)>;

/// Like actor_check, for types whose parameters depend on the rest of the deployment
/// (e.g. a worker's engine reads the deployment's `model:` section).
using actor_deployment_check = std::function<void(
    const std::string& path, const actor_params& params, const deployment_config& dep)>;

struct actor_type {
  std::string name;
  std::string doc;
  std::vector<param_spec> params;
  actor_factory factory;
  actor_check check;                       ///< optional
  actor_deployment_check check_deployment; ///< optional
};

class actor_registry {
public:
  /// Adds a type; throws std::invalid_argument if the name is taken or empty.
  void add(actor_type t);
  const actor_type* find(const std::string& name) const;
  std::vector<std::string> names() const;

  /// Checks every actor of every node: known type, known parameters of the right
  /// kinds, required ones present. Throws config_error naming the key path.
  void validate(const deployment_config& dep) const;

  /// Parameters of one configured actor (validated, defaults applied).
  actor_params params_for(const actor_config& a) const;

  /// A registry holding every in-tree type registered with PRFAAS_REGISTER_ACTOR_TYPE.
  static actor_registry with_builtins();

private:
  std::map<std::string, actor_type> types_;
};

namespace detail {

using registration_fn = void (*)(actor_registry&);
/// Records an in-tree registration function; returns true (for static init).
bool add_builtin_registration(registration_fn fn);

} // namespace detail

} // namespace prfaas

#define PRFAAS_PP_CAT_(a, b) a##b
#define PRFAAS_PP_CAT(a, b) PRFAAS_PP_CAT_(a, b)

/// Registers the in-tree actor types added by `fn(actor_registry&)`.
#define PRFAAS_REGISTER_ACTOR_TYPE(fn)                                                             \
  static const bool PRFAAS_PP_CAT(prfaas_registered_, __COUNTER__) =                               \
      ::prfaas::detail::add_builtin_registration(fn)
