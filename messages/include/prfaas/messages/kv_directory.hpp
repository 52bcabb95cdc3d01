#pragma once

// The KV directory's contract: soft state saying which cluster and node hold which
// prefix blocks. Holders number their reports with epochs; a higher epoch replaces
// what the directory had from that holder, a lower one is stale.
//
//   prefill   --BlocksStored-->   directory   one-way, from the pool's stored events
//   prefill   --BlocksEvicted-->  directory   one-way, from the pool's evicted events
//   scheduler --PrefixQuery-->    directory   request; PrefixMatch
//
// It asks holders (kv_holder_role: prefill workers by default, or the actor type its
// `holders` setting names) for everything they hold after its own start or theirs:
//
//   directory --Reannounce-->     holder      request; BlocksStored at a new epoch

#include <string_view>

#include "prfaas/messages/contract.hpp"
#include "prfaas/wire/directory.pb.h"

namespace prfaas {

struct kv_directory_role {
  static constexpr std::string_view name = "kv_directory";
  using accepts =
      contract::accepts<contract::one_way<directory::BlocksStored>,
                        contract::one_way<directory::BlocksEvicted>,
                        contract::request<directory::PrefixQuery, directory::PrefixMatch>>;
};

/// What the directory needs of a block holder. A holder's own role declares the same.
struct kv_holder_role {
  static constexpr std::string_view name = "kv holder";
  using accepts =
      contract::accepts<contract::request<directory::Reannounce, directory::BlocksStored>>;
};

} // namespace prfaas
