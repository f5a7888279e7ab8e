#!/usr/bin/env bash
# Quick start 2: install what is missing, build, and run every test (ctest).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$root/scripts/install-deps.sh"
"$root/scripts/build.sh"
cd "$root/build"
# -j: two suites at a time on 2 cores (each keeps about one busy, ctest's
# PROCESSORS 1); those marked SERIAL (liveness and rate measurements) run
# alone, the longest start first (COST). docs/tests.md has every suite's time.
ctest --output-on-failure --timeout 900 -j"$(nproc)" "$@"
