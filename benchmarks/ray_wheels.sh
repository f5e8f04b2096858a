#!/usr/bin/env bash
# Ray for the offline GPU machine (issue 19: eval.engine=ray with its one GPU). Ray's wheel
# for Python 3.12 is about 79 MB, more than one transfer there carries (64 MiB), so it
# travels in two parts, as the embedded model does: .ray/p1 (its first 48 MiB, the small
# wheels Ray needs that the image lacks, and the wheel's name) and .ray/p2 (the rest).
# Two `run` calls in quick succession (the machine stays warm between them):
#   first,  carrying .ray/p1:  benchmarks/gpu_session.sh ray-p1
#   second, carrying .ray/p2:  benchmarks/gpu_session.sh setup ray-setup ray-bench
# Usage: benchmarks/ray_wheels.sh [RAY_VERSION]   (default: the version in .venv, else 2.60.0)
set -euo pipefail
root=$(git rev-parse --show-toplevel)
cd "$root"
version=${1:-$(.venv/bin/python -c "import ray; print(ray.__version__)" 2>/dev/null || echo 2.60.0)}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
download() {
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 -d "$1" "${@:2}"
}
rm -rf .ray && mkdir -p .ray/p1 .ray/p2 "$tmp/ray"
download "$tmp/ray" "ray==$version"
# Ray's own requirements that the GPU image (torch, transformers, ...) may lack.
download .ray/p1 click jsonschema jsonschema-specifications referencing rpds-py msgpack protobuf
wheel=$(basename "$tmp"/ray/ray-*.whl)
echo "$wheel" > .ray/p1/NAME
split -b 48m "$tmp/ray/$wheel" "$tmp/ray/ray.part."
mv "$tmp/ray/ray.part.aa" .ray/p1/
mv "$tmp/ray/ray.part.ab" .ray/p2/
du -sh .ray/p1 .ray/p2
