#pragma once

// The decode worker's contract: it reserves a slot for a request, imports the KVCache
// the prefill worker sends over the data plane (TransferMeta travels with it), decodes
// with continuous batching and streams tokens to the gateway (gateway.hpp).
//
//   gateway   --DecodeOrder-->        decode   request; DecodeAccepted (slot reserved)
//   gateway   --DecodeStatusQuery-->  decode   request; DecodeStatus (resume: how far it got)
//   gateway   --Cancel-->             decode   one-way
//   scheduler --LoadQuery-->          decode   request; WorkerLoad

#include <string_view>

#include "prfaas/messages/contract.hpp"
#include "prfaas/wire/serving_common.pb.h"
#include "prfaas/wire/decode.pb.h"

namespace prfaas {

struct decode_role {
  static constexpr std::string_view name = "decode_worker";
  using accepts =
      contract::accepts<contract::request<serving::DecodeOrder, serving::DecodeAccepted>,
                        contract::request<serving::DecodeStatusQuery, serving::DecodeStatus>,
                        contract::one_way<serving::Cancel>,
                        contract::request<serving::LoadQuery, serving::WorkerLoad>>;
};

} // namespace prfaas
