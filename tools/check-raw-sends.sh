#!/usr/bin/env bash
# Every production message goes through a role's typed handle (remote_ref<Role>,
# prepare<Role>) and every role answers through dispatch<Role>: see
# runtime/include/prfaas/runtime/role.hpp. The untyped primitives below it are for the
# runtime itself and for tests; anywhere else they bypass the compiler's contract check.
set -euo pipefail
cd "$(dirname "$0")/.."
pattern='\b(make_remote|make_reply|request_remote|send_remote|parse_remote)[[:space:]]*\('
hits=$(git grep -nE "$pattern" -- '*.cpp' '*.hpp' ':!runtime/' ':!tests/' | grep -vE '^[^:]+:[0-9]+:[[:space:]]*//' || true)
if [ -n "$hits" ]; then
  echo "untyped remote messaging outside the runtime and tests (use remote_ref<Role> / dispatch<Role>):"
  echo "$hits"
  exit 1
fi
echo "check-raw-sends: every send outside runtime/ and tests/ goes through a role contract"
