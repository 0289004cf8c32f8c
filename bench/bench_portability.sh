#!/usr/bin/env bash
# The portability benchmark: on this CPU as it is and restricted to AVX2 (x86-64-v3), the best
# of 64 measurements for R5, Y9 and M3 in the tiles, microkernel and mapping spaces (fp32) against the
# vendors re-timed in the same run, with the % of the FMA peak (bench/bench_kernels.py); then int8 M3 and
# R5 in the mapping space against PyTorch's int8 kernels on the same (restricted) CPU (bench/bench_mapping.py).
#
#   bash bench/bench_portability.sh [OUT_DIR]     # about 40 minutes on 2 cores; run it on a quiet machine
#
# Each report starts with its command, the commit, the CPU and the date. Set BUDGET to change the 64.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
OUT=${1:-bench/reports/portability}
BUDGET=${BUDGET:-64}
mkdir -p "$OUT"
LAYERS=Conv2d-ResNet-R5-v0,Conv2d-YOLO-Y9-v0,Matmul-BERT-M3-v0

header() {  # $1: the command, as run
    echo "command: $1"
    echo "commit:  $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . ':!bench/reports' || echo ' (+ uncommitted changes)')"
    echo "cpu:     $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //') (family $(grep -m1 'cpu family' /proc/cpuinfo | cut -d: -f2 | tr -d ' ') model $(grep -m1 '^model' /proc/cpuinfo | cut -d: -f2 | tr -d ' ')), $(nproc) vCPUs; TENSORGYM_CPU=${TENSORGYM_CPU:-native}"
    echo "date:    $(date -u +%Y-%m-%dT%H:%MZ)"
    echo
}

for cpu in native x86-64-v3; do
    cmd="TENSORGYM_CPU=$cpu $PY bench/bench_kernels.py --layers $LAYERS --budgets $BUDGET \
--combos tiles-random,microkernel-nhwc-weights,mapping-random --retime 3 --trial-budget 0 \
--json $OUT/kernels_$cpu.json"
    { TENSORGYM_CPU=$cpu header "$cmd"; TENSORGYM_CPU=$cpu eval "$cmd"; } > "$OUT/kernels_$cpu.txt" 2>&1
done
cmd="TENSORGYM_CPU=x86-64-v3 $PY bench/bench_mapping.py --layers Matmul-BERT-M3-v0,Conv2d-ResNet-R5-v0 \
--dtypes int8 --agents random --budgets $BUDGET --no-metaschedule --candidates-layer '' --retime 3 \
--json $OUT/mapping_int8_x86-64-v3.json"
{ TENSORGYM_CPU=x86-64-v3 header "$cmd"; eval "$cmd"; } > "$OUT/mapping_int8_x86-64-v3.txt" 2>&1
echo "written to $OUT"
