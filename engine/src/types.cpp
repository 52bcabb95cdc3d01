#include "prfaas/engine/types.hpp"

#include <algorithm>

namespace prfaas::engine {

const char* to_string(layer_kind kind) noexcept {
  switch (kind) {
  case layer_kind::linear:
    return "linear";
  case layer_kind::full:
    return "full";
  case layer_kind::meta:
    return "meta";
  }
  return "unknown";
}

uint32_t model_info::n_full() const noexcept {
  return static_cast<uint32_t>(std::count(layers.begin(), layers.end(), layer_kind::full));
}

uint32_t model_info::n_linear() const noexcept {
  return static_cast<uint32_t>(std::count(layers.begin(), layers.end(), layer_kind::linear));
}

} // namespace prfaas::engine
