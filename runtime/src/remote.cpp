#include "prfaas/runtime/remote.hpp"

namespace prfaas {

caf::error unknown_type(node_context& ctx, const remote_message& m) {
  ctx.msgr().counters().drop(drop_reason::unknown_type);
  return make_error(errc::unknown_type, m.destination.to_string() + " does not handle " + m.type);
}

} // namespace prfaas
