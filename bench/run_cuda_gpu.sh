#!/bin/sh
# Runs issue 16's benchmark on the offline GPU machine, in three calls of the device tool made one right
# after the other (the machine keeps /tmp only while it stays warm, 30 s after a call):
#
#   a  (carry .gpu_carry/a)  cutlass space profiled exhaustively for M3 fp16, cuBLAS/cuDNN   (~6 min)
#   b  (carry .gpu_carry/b)  TVM assembled; tiles runs dgd:R5 ga:R5 dgd:M3                    (~7 min)
#   c  (no carry)            tiles runs ga:M3 dgd:M3-fp16 ga:M3-fp16, the report, pytest -m gpu (~9 min)
#
# Each step stops its measuring in time (timeout) to leave $OUT/bench.tgz (database + finished runs); a run
# cut off is resumed by the next step from the database, and a step can be run again (c until the report
# lists all six tiles runs). If the machine was given back between steps, step b or c says so: put the
# last bench.tgz in .gpu_carry/resume/, carry it with the step's folder, and run a and b again (TVM's
# first part lives in /tmp); nothing measured before is measured again.
# Prepared by bench/pack_cuda_carry.sh. Usage: sh bench/run_cuda_gpu.sh a|b|c
set -u
STEP=${1:?usage: run_cuda_gpu.sh a|b|c}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TG=${TG_DIR:-/tmp/tg}
SITE=$TG/site
BENCH=$TG/bench
OUT=${OUT:-$TG/out}
mkdir -p "$SITE" "$OUT"
export PYTHONPATH=$SITE PYTHONUNBUFFERED=1 TENSORGYM_CUDA_CACHE=$TG/cuda-cache TVM_FFI_DISABLE_TORCH_C_DLPACK=1
PY=${PYTHON:-python3}
cd "$ROOT"

# tensorgym from this checkout (its envs/agents/baselines folders live in the tensorgym namespace)
rm -rf "$SITE/tensorgym"
cp -r tensorgym "$SITE/tensorgym"
for sub in envs agents baselines; do rm -rf "$SITE/tensorgym/$sub"; cp -r "$sub" "$SITE/tensorgym/$sub"; done
if [ ! -d "$BENCH" ] && [ -f .gpu_carry/resume/bench.tgz ]; then
    mkdir -p "$TG" && tar xzf .gpu_carry/resume/bench.tgz -C "$TG" && echo "resumed from .gpu_carry/resume"
fi
mkdir -p "$BENCH"
install_wheels() { $PY -m pip install --quiet --no-index --no-deps --no-compile --target "$SITE" "$@"; }
bench() { $PY bench/bench_cuda.py --db "$BENCH/cuda.db" --out "$BENCH/runs" -q "$@"; }
save() { tar czf "$OUT/bench.tgz" -C "$TG" bench; ls -l "$OUT"; }

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu --format=csv
$PY -c "import sys, numpy, torch; print(sys.version.split()[0], numpy.__version__, torch.__version__)"
$PY -m pip show cuda-bindings nvidia-ml-py 2>/dev/null | grep -E "^(Name|Version)"

case $STEP in
a)
    cp .gpu_carry/a/tvm.tar.xz.part00 "$TG/"
    install_wheels .gpu_carry/a/*.whl || exit 2
    timeout 500 $PY bench/bench_cuda.py --db "$BENCH/cuda.db" --out "$BENCH/runs" -q --parts cutlass
    bench --parts vendor
    save ;;
b)
    if [ ! -f "$TG/tvm.tar.xz.part00" ]; then
        echo "TVM's first part is not in $TG: the machine was given back after step a. Run a again, then b."
        exit 3
    fi
    cp .gpu_carry/b/tvm.tar.xz.part0* "$TG/" && cat "$TG"/tvm.tar.xz.part0* > "$TG/tvm.tar.xz"
    (cd "$TG" && sha256sum -c "$ROOT/.gpu_carry/b/tvm.sha256") || exit 4
    tar xJf "$TG/tvm.tar.xz" -C "$SITE" && rm "$TG"/tvm.tar.xz*
    install_wheels .gpu_carry/b/*.whl || exit 2
    $PY -c "import tvm; print('tvm', tvm.__version__)" || exit 5
    timeout 500 $PY bench/bench_cuda.py --db "$BENCH/cuda.db" --out "$BENCH/runs" -q --parts tiles \
        --runs dgd:R5,ga:R5,dgd:M3
    save ;;
c)
    $PY -c "import tvm" || { echo "TVM is not in $SITE: the machine was given back; run a and b again"; exit 3; }
    timeout 400 $PY bench/bench_cuda.py --db "$BENCH/cuda.db" --out "$BENCH/runs" -q --parts tiles
    bench --parts report
    save
    timeout 120 $PY -m pytest -q -m gpu -p no:cacheprovider tests/test_cuda_gpu.py 2>&1 | tail -30 ;;
*)
    echo "unknown step $STEP (a, b or c)"; exit 1 ;;
esac
