// Sources that must not compile: each PRFAAS_MISUSE case breaks a role contract the way a
// developer could, and the build must stop with the contract's own message (see
// CMakeLists.txt). Case 0 is the same code used correctly: it must compile, so that the
// failures are the misuse and not a broken file.

#include "prfaas/messages/decode.hpp"
#include "prfaas/runtime/role.hpp"
#include "prfaas/wire/prefill.pb.h" // PrefillOrder: a message the decode role does not declare

namespace prfaas {

using serving::Cancel;
using serving::DecodeAccepted;
using serving::DecodeOrder;
using serving::DecodeStatus;
using serving::DecodeStatusQuery;
using serving::LoadQuery;
using serving::PrefillOrder;
using serving::WorkerLoad;

void sends(caf::event_based_actor* self, const remote_ref<decode_role>& d) {
  d.send(Cancel{});
  d.request(self, DecodeOrder{}, std::chrono::seconds(1))
      .then([](DecodeAccepted&) {}, [](caf::error&) {});
#if PRFAAS_MISUSE == 1
  d.send(PrefillOrder{}); // the decode worker takes no prefill orders
#elif PRFAAS_MISUSE == 2
  d.request(self, Cancel{}, std::chrono::seconds(1))
      .then([](auto&) {}, [](caf::error&) {}); // one-way only
#elif PRFAAS_MISUSE == 3
  d.send(DecodeOrder{}); // a request, not a one-way message
#endif
}

caf::result<remote_message> answers(node_context& ctx, remote_message& msg) {
  return dispatch<decode_role>(
      ctx, msg, [](DecodeOrder&) { return DecodeAccepted{}; },
      [](DecodeStatusQuery&) { return DecodeStatus{}; },
#if PRFAAS_MISUSE == 4
  // no handler for Cancel
#else
      [](Cancel&) {},
#endif
#if PRFAAS_MISUSE == 5
      [](PrefillOrder&) {}, // a handler of a message decode_role does not declare
#endif
#if PRFAAS_MISUSE == 6
      [](LoadQuery&) { return DecodeStatus{}; } // answers with another type than WorkerLoad
#else
      [](LoadQuery&) { return WorkerLoad{}; }
#endif
  );
}

} // namespace prfaas
