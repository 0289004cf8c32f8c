#!/bin/sh
# The GPU benchmark on an offline GPU machine (Python 3.12, no network), in two calls of the device tool made
# one right after the other: the machine keeps /tmp only while it stays warm (30 s after a call), and one
# call carries at most 64 MiB, less than TVM and the wheels together.
#
#   a  (carry .gpu_carry/a)  pytest -m gpu without TVM (device, CUTLASS, vendors); the cutlass space on
#                            BERT M3 fp16 against cuBLAS; cuBLAS/cuDNN on every layer             (≤ 5 min)
#   b  (carry .gpu_carry/b)  TVM assembled; pytest -m gpu again, now with the TVM kernels; the tiles
#                            sketch by DGD (seed 000's GPU features), then GA, on R5 and M3; report  (≤ 7 min)
#
# Ordered by value: a call cut off still leaves what it finished in $OUT (bench.tgz: the database and the
# finished runs; pytest-*.txt: the tests' counts). A step run again measures nothing twice: a later call
# resumes from the database (put the last bench.tgz in .gpu_carry/resume/ and carry it too). If the machine
# was given back between a and b, b says so: run a again (it resumes), then b.
# Prepared by bench/pack_cuda_carry.sh. Usage: sh bench/run_cuda_gpu.sh a|b
set -u
STEP=${1:?usage: run_cuda_gpu.sh a|b}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TG=${TG_DIR:-/tmp/tg}  # /tmp/tg: the prebuilt kernels were compiled with their CUTLASS include paths under it
SITE=$TG/site
BENCH=$TG/bench
OUT=${OUT:-$TG/out}
BUDGET=${BUDGET:-64}
mkdir -p "$SITE" "$OUT"
export PYTHONPATH=$SITE PYTHONUNBUFFERED=1 TENSORGYM_CUDA_CACHE=$TG/cuda-cache TVM_FFI_DISABLE_TORCH_C_DLPACK=1
PY=${PYTHON:-python3}
cd "$ROOT"

# tensorgym from this checkout (its envs/agents/baselines folders live in the tensorgym namespace)
rm -rf "$SITE/tensorgym"
cp -r tensorgym "$SITE/tensorgym"
for sub in envs agents baselines; do rm -rf "$SITE/tensorgym/$sub"; cp -r "$sub" "$SITE/tensorgym/$sub"; done
if [ ! -d "$BENCH" ] && [ -f .gpu_carry/resume/bench.tgz ]; then
    tar xzf .gpu_carry/resume/bench.tgz -C "$TG" && echo "resumed from .gpu_carry/resume"
fi
mkdir -p "$BENCH"
install_wheels() { $PY -m pip install --quiet --no-index --no-deps --no-compile --target "$SITE" "$@"; }
bench() { $PY bench/bench_cuda.py --db "$BENCH/cuda.db" --out "$BENCH/runs" -q "$@" 2>&1 | tee -a "$OUT/bench-$STEP.txt"; }
save() { tar czf "$OUT/bench.tgz" -C "$TG" bench; ls -l "$OUT"; }
# The GPU tests run from a folder of their own, so that `import tensorgym` finds the assembled package in $SITE.
gpu_tests() {
    rm -rf "$TG/tests" && cp -r tests "$TG/tests" && cp pyproject.toml "$TG/"
    (cd "$TG" && timeout "$1" $PY -m pytest -m gpu -p no:cacheprovider -rs -q tests/test_cuda_gpu.py 2>&1) \
        | tee "$OUT/pytest-$STEP.txt" | tail -25
}

{
    date -u
    nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,clocks.max.mem,power.limit,temperature.gpu \
        --format=csv
    nproc
    $PY -c "import sys, numpy, torch; print(sys.version.split()[0], 'numpy', numpy.__version__, 'torch', torch.__version__)"
    $PY -m pip show cuda-bindings nvidia-ml-py 2>/dev/null | grep -E "^(Name|Version)"
    nvcc --version | grep -o "release .*"
} 2>&1 | tee -a "$OUT/machine.txt"

case $STEP in
a)
    cp .gpu_carry/a/tvm.tar.xz.part00 "$TG/"
    install_wheels .gpu_carry/a/*.whl || exit 2
    mkdir -p "$TG/cuda-cache" && tar xJf .gpu_carry/a/cuda-cache.tar.xz -C "$TG/cuda-cache"
    echo "prebuilt kernels: $(ls "$TG/cuda-cache" | grep -c cubin\\\|so\$)"
    gpu_tests 120
    timeout 120 $PY bench/bench_cuda.py --db "$BENCH/cuda.db" --out "$BENCH/runs" -q --parts cutlass \
        --cutlass-swizzles 8 2>&1 | tee -a "$OUT/bench-a.txt" | tail -5
    timeout 45 $PY bench/bench_cuda.py --db "$BENCH/cuda.db" --out "$BENCH/runs" -q --parts vendor,report \
        2>&1 | tee -a "$OUT/bench-a.txt"
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
    gpu_tests 100
    timeout 270 $PY bench/bench_cuda.py --db "$BENCH/cuda.db" --out "$BENCH/runs" -q --parts tiles \
        --budget "$BUDGET" --runs dgd:R5,dgd:M3,ga:R5,ga:M3 2>&1 | tee -a "$OUT/bench-b.txt" | tail -8
    timeout 40 $PY bench/bench_cuda.py --db "$BENCH/cuda.db" --out "$BENCH/runs" -q --parts report \
        2>&1 | tee -a "$OUT/bench-b.txt"
    save ;;
*)
    echo "unknown step $STEP (a or b)"; exit 1 ;;
esac
