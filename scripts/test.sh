#!/usr/bin/env bash
# Quick start 2: install what is missing, build, and run every test (ctest).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$root/scripts/install-deps.sh"
"$root/scripts/build.sh"
cd "$root/build"
# -j: suites that keep one core busy (the fuzzers) run side by side; every
# other suite asks for all the cores (ctest's PROCESSORS) and runs alone.
ctest --output-on-failure --timeout 900 -j"$(nproc)" "$@"
