#!/bin/sh
# Prepares what bench/run_cuda_gpu.sh needs on the offline GPU machine (Python 3.12, no network) in
# .gpu_carry/ (ignored by git), split in two because one call of the device tool carries at most 64 MiB
# (the working tree included):
#
#   .gpu_carry/a/  the first part of TVM (xz); the wheels the cutlass space needs (nvidia-cutlass, gymnasium,
#                  farama-notifications); the CUTLASS kernels compiled ahead for an H100 (cuda-cache.tar.xz)
#   .gpu_carry/b/  the rest of TVM and the wheels the tiles space and the cost models need
#                  (apache-tvm-ffi for Python 3.12, xgboost-cpu)
#
# The apache-tvm wheel is py3-none: the tree installed here works on 3.12 once apache-tvm-ffi is the cp312
# build. The GPU image already has numpy, scipy, ml-dtypes, tqdm, psutil, cloudpickle, torch, cuda-bindings
# and nvidia-ml-py. The CUTLASS kernels are compiled with their include paths under /tmp/tg/site, where
# run_cuda_gpu.sh installs nvidia-cutlass on the GPU machine: the paths are part of the cache's keys.
# Takes about 20 minutes on 2 cores (nvcc and xz). Run from the repository root: sh bench/pack_cuda_carry.sh
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PY=${PYTHON:-$ROOT/.venv/bin/python}
CARRY=$ROOT/.gpu_carry
TG=/tmp/tg
SITE=$("$PY" -c "import os, tvm; print(os.path.dirname(os.path.dirname(tvm.__file__)))")
rm -rf "$CARRY/a" "$CARRY/b" "$CARRY/tvm.tar.xz"
mkdir -p "$CARRY/a" "$CARRY/b" "$TG/site" "$TG/cuda-cache"

download() {  # download DIR NAME==VERSION...: binary wheels for CPython 3.12 on x86-64 Linux, without dependencies
    dir=$1; shift
    "$PY" -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_24_x86_64 \
        --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d "$dir" "$@"
}
download "$CARRY/a" nvidia-cutlass==4.2.0.0 gymnasium==1.4.0 farama-notifications==0.0.6
download "$CARRY/b" apache-tvm-ffi==0.1.14.post1 xgboost-cpu==3.2.0

echo "CUTLASS kernels for an H100, into $TG/cuda-cache (nvcc; 20-40 s a kernel)"
"$PY" -m pip install --quiet --no-index --no-deps --no-compile --target "$TG/site" --upgrade "$CARRY"/a/*.whl
TENSORGYM_CUDA_CACHE=$TG/cuda-cache PYTHONPATH=$TG/site "$PY" bench/bench_cuda.py --prebuild --cutlass-swizzles 8
tar -C "$TG/cuda-cache" --exclude='*.lock' -cf - . | xz -9 -T2 > "$CARRY/a/cuda-cache.tar.xz"

echo "TVM from $SITE (xz -9; takes minutes)"
tar -C "$SITE" --exclude='tvm/3rdparty' --exclude='tvm/src' --exclude='tvm/include' --exclude='tvm/web' \
    --exclude='__pycache__' -cf - tvm apache_tvm-0.27.0.post1.dist-info | xz -9 -T2 > "$CARRY/tvm.tar.xz"
(cd "$CARRY" && sha256sum tvm.tar.xz > b/tvm.sha256)
split -b 38m -d "$CARRY/tvm.tar.xz" "$CARRY/tvm.tar.xz.part"
mv "$CARRY/tvm.tar.xz.part00" "$CARRY/a/"
mv "$CARRY"/tvm.tar.xz.part* "$CARRY/b/"
rm "$CARRY/tvm.tar.xz"
du -sh "$CARRY/a" "$CARRY/b"
ls -l "$CARRY/a" "$CARRY/b"
