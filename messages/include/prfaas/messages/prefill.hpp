#pragma once

// The prefill worker's contract: it computes a prompt's KVCache (and recurrent state),
// ships it over the data plane to the decode worker the order names, and keeps a prefix
// cache that the KV directory indexes and other workers can pull from.
//
//   gateway   --PrefillOrder-->       prefill   request; PrefillDone once the decode
//                                                worker confirmed the whole transfer
//   gateway   --Cancel-->             prefill   one-way (deadline, client gone, failover)
//   scheduler --LoadQuery-->          prefill   request; WorkerLoad
//   directory --Reannounce-->         prefill   request; BlocksStored: all it holds, at a
//                                                new epoch
//   prefill   --CachePull-->          prefill   request; CachePullAccepted, then the
//                                                blocks travel over the data plane
//
// It sends: BlocksStored / BlocksEvicted to the directory (kv_directory.hpp).

#include <string_view>

#include "prfaas/messages/contract.hpp"
#include "prfaas/messages/kv_directory.hpp"
#include "prfaas/wire/directory.pb.h"
#include "prfaas/wire/serving_common.pb.h"
#include "prfaas/wire/prefill.pb.h"

namespace prfaas {

struct prefill_role {
  static constexpr std::string_view name = "prefill_worker";
  using accepts =
      contract::accepts<contract::request<serving::PrefillOrder, serving::PrefillDone>,
                        contract::one_way<serving::Cancel>,
                        contract::request<serving::LoadQuery, serving::WorkerLoad>,
                        contract::request<directory::Reannounce, directory::BlocksStored>,
                        contract::request<serving::CachePull, serving::CachePullAccepted>>;
};

static_assert(contract::answers<prefill_role, directory::Reannounce>,
              "a prefill worker holds KV blocks: it answers what kv_holder_role declares");

} // namespace prfaas
