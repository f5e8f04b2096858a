"""What compiling a problem's ``compile`` baseline on fake tensors first saves its first
real call: ``torch.compile``'s first call cold against the same call after a compile on
torch's fake tensors (no memory, nothing run), as ``eval.compile_ahead=fake_first`` does
(``ReferenceOps.op_compile_baseline_fake``), each in a fresh process with fresh inductor
and Triton caches. On a GPU the profiler also counts the GPU activity of the fake compile.

    python benchmarks/fake_compile.py --problems problems.jsonl --names 19_ReLU,23_Softmax [--device cuda]

Prints one JSON line per problem and arm: ``cold`` (``real_first_call_s``) and ``fake``
(``fake_s``, then ``real_first_call_s`` with inductor's graph cache hits and misses, and
whether the compiled output matches eager).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time


def child(code: str, device: str, arm: str) -> None:
    import torch

    namespace: dict = {}
    exec(compile(code, "problem", "exec"), namespace)  # noqa: S102 - the benchmark's own problem file

    def real_inputs() -> list:
        torch.manual_seed(1)
        return [x.to(device) if isinstance(x, torch.Tensor) else x for x in namespace["get_inputs"]()]

    out: dict = {"arm": arm}
    if arm == "fake":
        from torch._subclasses.fake_tensor import FakeTensorMode

        from kz_core.evaluate.reference_ops import _compile_only_backend

        profiler = None
        if device.startswith("cuda"):
            from torch.profiler import ProfilerActivity, profile

            profiler = profile(activities=[ProfilerActivity.CUDA])
            profiler.__enter__()
        started = time.perf_counter()
        try:
            with FakeTensorMode(), torch.device(device):
                model = namespace["Model"](*namespace["get_init_inputs"]())
                inputs = [x.to(device) if isinstance(x, torch.Tensor) else x for x in namespace["get_inputs"]()]
                torch.compile(model, backend=_compile_only_backend())(*inputs)
        except Exception as exc:  # noqa: BLE001 - reported
            out["fake_error"] = f"{type(exc).__name__}: {exc}"[:300]
        out["fake_s"] = round(time.perf_counter() - started, 3)
        if profiler is not None:
            torch.cuda.synchronize()
            profiler.__exit__(None, None, None)
            events = [e for e in profiler.events() if e.device_type == torch.autograd.DeviceType.CUDA]
            out["gpu_events_in_fake"] = len(events)
            out["gpu_event_names"] = sorted({e.name for e in events})[:5]
        torch._dynamo.reset()
    from torch._dynamo.utils import counters

    torch.manual_seed(0)
    model = namespace["Model"](*namespace["get_init_inputs"]()).to(device)
    inputs = real_inputs()
    with torch.no_grad():
        expected = model(*inputs)
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    started = time.perf_counter()
    got = torch.compile(model)(*inputs)
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    out["real_first_call_s"] = round(time.perf_counter() - started, 3)
    out["graph_cache_hits"] = counters["inductor"]["fxgraph_cache_hit"]
    out["graph_cache_misses"] = counters["inductor"]["fxgraph_cache_miss"]
    if isinstance(expected, torch.Tensor):
        out["matches_eager"] = bool(torch.allclose(expected.float(), got.float(), rtol=1e-2, atol=1e-2))
    print("RESULT " + json.dumps(out), flush=True)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        with open(sys.argv[2]) as handle:
            child(json.load(handle)["code"], sys.argv[3], sys.argv[4])
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", required=True, help="a problems JSONL file (name, code)")
    parser.add_argument("--names", required=True, help="comma-separated problem names")
    parser.add_argument("--device", default="cuda")
    args = parser.parse_args()
    names = args.names.split(",")
    with open(args.problems) as handle:
        rows = [row for row in map(json.loads, handle) if row["name"] in names]
    for row in rows:
        for arm in ("cold", "fake"):
            with tempfile.TemporaryDirectory() as folder:
                path = os.path.join(folder, "problem.json")
                with open(path, "w") as handle:
                    json.dump(row, handle)
                env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": os.path.join(folder, "inductor"), "TRITON_CACHE_DIR": os.path.join(folder, "triton")}
                started = time.perf_counter()
                done = subprocess.run([sys.executable, __file__, "--child", path, args.device, arm], env=env, capture_output=True, text=True, timeout=900)
                lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
                result = json.loads(lines[0][len("RESULT ") :]) if lines else {"error": done.stderr[-600:], "rc": done.returncode}
                result.update(problem=row["name"], process_s=round(time.perf_counter() - started, 2))
                print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
