#include "prfaas/engine/clock.hpp"

#include <thread>

namespace prfaas::engine {

nanos real_clock::now() const {
  return std::chrono::duration_cast<nanos>(std::chrono::steady_clock::now().time_since_epoch());
}

void real_clock::sleep_for(nanos d) {
  if (d.count() > 0)
    std::this_thread::sleep_for(d);
}

} // namespace prfaas::engine
