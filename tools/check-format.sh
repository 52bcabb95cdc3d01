#!/usr/bin/env bash
# Every C++ source in the tree is formatted by Debian's clang-format with the repository's
# .clang-format. To fix: git ls-files '*.cpp' '*.hpp' '*.h' | xargs clang-format -i
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v clang-format >/dev/null; then
  echo "check-format: clang-format is not installed (tools/bootstrap.sh installs it)"
  exit 1
fi
git ls-files -z '*.cpp' '*.hpp' '*.h' | xargs -0 clang-format --dry-run -Werror
echo "check-format: $(git ls-files '*.cpp' '*.hpp' '*.h' | wc -l) files formatted as .clang-format says"
