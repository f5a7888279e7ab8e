#!/usr/bin/env bash
# One bounded libFuzzer session, as ctest runs it (fuzz/fuzzing.cmake):
#
#   run_fuzzer.sh FUZZER CORPUS WORKDIR SECONDS MAX_LEN [DICT]
#
# The committed CORPUS is copied to WORKDIR/corpus first, so that what the
# session adds stays in the build tree. A crash, a sanitizer report, a hang
# (-timeout), or memory beyond -rss_limit_mb fails with the reproducer's path.
# BATON_FUZZ_SECONDS and BATON_FUZZ_SEED override the duration and the seed
# (ctest uses a fixed seed; the same binary and seed explore the same way).
set -euo pipefail
fuzzer=$1 corpus=$2 work=$3 seconds=${BATON_FUZZ_SECONDS:-$4} max_len=$5 dict=${6:-}
seed=${BATON_FUZZ_SEED:-1}

rm -rf "$work"
mkdir -p "$work/corpus" "$work/artifacts"
cp -R "$corpus/." "$work/corpus/"

args=(-max_total_time="$seconds" -seed="$seed" -max_len="$max_len" -rss_limit_mb=2048
      -malloc_limit_mb=2048 -timeout=10 -print_final_stats=1
      -artifact_prefix="$work/artifacts/")
if [[ -n "$dict" ]]; then args+=(-dict="$dict"); fi

export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}
status=0
"$fuzzer" "${args[@]}" "$work/corpus" || status=$?
if ((status != 0)); then
  echo "fuzz: $(basename "$fuzzer") failed (exit $status); reproducer(s):"
  for f in "$work"/artifacts/*; do
    [[ -e "$f" ]] && echo "  $f   (replay: $fuzzer $f)"
  done
  echo "fuzz: fix the bug, then keep the input: cp REPRODUCER $corpus/regression-WHAT"
  exit 1
fi
echo "fuzz: $(basename "$fuzzer"): no crash in ${seconds}s; corpus now $(ls "$work/corpus" | wc -l) inputs"
