#!/usr/bin/env bash
# Quick start 1: install what is missing, build, and run the main job (the
# transfer job of configs/transfer.yaml, all actors in one process). Extra
# arguments go to `baton run`, e.g. --local-nodes 3 or --baseline separate.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$root/scripts/install-deps.sh"
"$root/scripts/build.sh" baton
exec "$root/build/apps/baton" run "$root/configs/transfer.yaml" \
  --metrics-out "$root/build/transfer-metrics.json" "$@"
