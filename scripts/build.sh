#!/usr/bin/env bash
# Configures and builds baton in ./build (Release). Extra arguments are build
# targets (default: everything).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
jobs=$(nproc)
# Ninja where it is installed (scripts/install-deps.sh installs it): a cold
# build took 1,408 s here against Make's 1,455 s (docs/tests.md). A build
# directory configured with another generator keeps it.
generator=()
if [[ ! -f "$root/build/CMakeCache.txt" ]] && command -v ninja >/dev/null; then
  generator=(-G Ninja)
fi
cmake -S "$root" -B "$root/build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release >/dev/null
if (($#)); then
  cmake --build "$root/build" -j"$jobs" --target "$@"
else
  cmake --build "$root/build" -j"$jobs"
fi
