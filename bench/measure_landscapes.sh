#!/usr/bin/env bash
# Measure the shipped layers' landscapes on this CPU, in chunks, resumably (see README "Landscapes").
#
#   bash bench/measure_landscapes.sh [DB] [ENV_ID ...]
#   SPACE=microkernel bash bench/measure_landscapes.sh work/landscapes-mk.db Conv2d-ResNet-R5-v0
#   MODE=sample bash bench/measure_landscapes.sh work/samples.db       # 2,000 configs of each whole tiles space
#   OPTIONS="--importance-choices 15" bash bench/measure_landscapes.sh work/c7.db Conv2d-ResNet18-C7-v0
#
# Each layer's benchmark space is anchored at the best config of a search of the full space (512
# measurements: the GA in the tiles space, random-structured in the microkernel space), which the first
# chunk runs into ANCHOR_DB (default: DB's name with "-anchor").
# Each chunk holds the CPU lock (/tmp/tensorgym-cpu.lock) for at most CHUNK_S seconds, so a test run
# or a benchmark that takes the same lock runs between chunks and never beside a timing. Killed at any
# point, the job loses nothing: run it again and it goes on where the database stands.
set -euo pipefail
DB=${1:-work/landscapes.db}
shift || true
LAYERS=("$@")
[ ${#LAYERS[@]} -gt 0 ] || LAYERS=(Conv2d-ResNet-R5-v0 Matmul-BERT-M3-v0 Conv2d-ResNet18-C7-v0 Conv2d-YOLO-Y9-v0)
CHUNK_S=${CHUNK_S:-240}
SPACE=${SPACE:-tiles}
MODE=${MODE:-measure}  # measure: the benchmark space; sample: a uniform sample of the whole tiles space (CONFIGS)
LOCK=${TENSORGYM_CPU_LOCK:-/tmp/tensorgym-cpu.lock}
for id in "${LAYERS[@]}"; do
  while true; do
    case $MODE in
      # shellcheck disable=SC2206 # OPTIONS: more options of `landscape measure`, split on spaces
      measure) job=(measure "$id" --db "$DB" --space "$SPACE" ${ANCHOR_DB:+--anchor-db "$ANCHOR_DB"} ${OPTIONS:-}) ;;
      sample) job=(sample "$id" --db "$DB" --configs "${CONFIGS:-2000}") ;;
      *) echo "MODE must be measure or sample, not $MODE" >&2; exit 2 ;;
    esac
    out=$(flock "$LOCK" "${TENSORGYM:-.venv/bin/tensorgym}" landscape "${job[@]}" --time-limit "$CHUNK_S" -q)
    echo "$(date -u +%FT%TZ) $out"
    case "$out" in *complete*) break ;; esac
    sleep 5  # let a waiting test run take the lock
  done
done
