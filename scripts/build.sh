#!/usr/bin/env bash
# Configures and builds baton in ./build (Release). Extra arguments are build
# targets (default: everything).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
jobs=$(nproc)
cmake -S "$root" -B "$root/build" -DCMAKE_BUILD_TYPE=Release >/dev/null
if (($#)); then
  cmake --build "$root/build" -j"$jobs" --target "$@"
else
  cmake --build "$root/build" -j"$jobs"
fi
