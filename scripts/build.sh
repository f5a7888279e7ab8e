#!/usr/bin/env bash
# Configures and builds baton in ./build (Release). Extra arguments are build
# targets (default: everything).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
jobs=$(nproc)
# Ninja: it starts a target's compiles before the libraries it links are
# built (Make's generator waits for them), which keeps both cores busy. A
# build directory configured with another generator keeps it.
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
