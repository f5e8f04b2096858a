"""Which pairs of processes can share a CUDA tensor by torch's (legacy) CUDA IPC, when one
or both run in a PID namespace of their own as kz's sandboxed workers do.

kz compares outputs that are too large to move (``eval.transfer_limit_mb``) on the GPU: the
executor (or a candidate worker) shares them by CUDA IPC and a reference worker opens them
(``kz_core/evaluate/execution.py``: ``share_cuda_tensor``, ``open_shared_cuda_tensor``).
Every sandboxed worker was PID 1 of a PID namespace of its own until kz gave each a
unique process id (``kz_core/evaluate/isolation.py``: ``enter_namespaces``), so exporter
and importer carried the same one. This probe runs an exporter and an importer as
fresh processes for each pair of placements and says whether the importer opened the tensor and read the
exporter's values:

- ``host``: no namespace of its own (the caller's PID namespace);
- ``pid1``: PID 1 of a new PID (and user, mount, network, IPC, UTS) namespace, as kz's
  workers were;
- ``pid2``: the same namespaces, but the second process in them (PID 2);
- ``unique``: as kz's workers are now (``isolation.enter_namespaces``): the same
  namespaces, the worker forked by PID 1 with the process id of its supervisor outside
  (``/proc/sys/kernel/ns_last_pid``), unique on the machine.

If ``pid1 -> pid1`` and ``pid2 -> pid2`` fail while ``pid1 -> pid2`` and ``unique -> unique``
open, CUDA refuses a handle whose exporter has the importer's own process id, and distinct
ids are the fix; if every namespaced pair fails, large outputs need another transport.

Usage, on a machine with an NVIDIA GPU (about a minute):

    python benchmarks/ipc_probe.py --out results/ipc_probe.json
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import versions, write_json  # noqa: E402

PLACES = ("host", "pid1", "pid2", "unique")
PAIRS = (
    ("host", "host"), ("pid1", "host"), ("host", "pid1"), ("pid1", "pid1"), ("pid1", "pid2"), ("pid2", "pid1"), ("pid2", "pid2"), ("unique", "unique"),
)
N = 1 << 20


def _exit_with(child: int) -> None:
    """Wait for ``child`` and end this process with its exit status."""
    _, status = os.waitpid(child, 0)
    os._exit(os.waitstatus_to_exitcode(status) & 0xFF)


def enter(place: str, scratch: Path) -> None:
    """Put this process where ``place`` says; the parents left behind wait and pass on the
    exit status (they never return)."""
    if place == "host":
        return
    from kz_core.evaluate import isolation

    # unshare(CLONE_NEWUSER) needs a single-threaded process: a fork's child is one (as
    # kz's zygote forks a supervisor that enters the namespaces).
    child = os.fork()
    if child:
        _exit_with(child)
    if place != "unique":
        isolation._fork_worker = lambda pid: 0  # noqa: SLF001 - PID 1 works itself, as kz's workers did before
    child = isolation.enter_namespaces(None, scratch)
    if child:
        _exit_with(child)
    if place == "pid2":
        child = os.fork()
        if child:
            _exit_with(child)


def export(folder: Path) -> None:
    import torch

    from kz_core.evaluate.execution import share_cuda_tensor

    tensor = torch.arange(N, dtype=torch.float32, device="cuda")
    torch.cuda.synchronize()
    description = share_cuda_tensor(tensor)
    encoded = {key: base64.b64encode(value).decode() if isinstance(value, bytes) else value for key, value in description.items()}
    (folder / "shared.json").write_text(json.dumps({"pid": os.getpid(), "description": encoded}))
    deadline = time.monotonic() + 120
    while not (folder / "opened").exists() and time.monotonic() < deadline:
        time.sleep(0.05)


def import_(folder: Path) -> None:
    import torch

    from kz_core.evaluate.execution import open_shared_cuda_tensor

    deadline = time.monotonic() + 120
    while not (folder / "shared.json").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    shared = json.loads((folder / "shared.json").read_text())
    description = {key: base64.b64decode(value) if key in ("handle", "ref_counter_handle", "event_handle") else value for key, value in shared["description"].items()}
    result: dict[str, Any] = {"exporter_pid": shared["pid"], "importer_pid": os.getpid()}
    try:
        tensor = open_shared_cuda_tensor(description)
        result["opened"] = True
        result["values_match"] = bool(torch.equal(tensor, torch.arange(N, dtype=torch.float32, device="cuda")))
    except Exception as exc:  # noqa: BLE001 - the finding
        result.update(opened=False, error=f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:300])
    (folder / "result.json").write_text(json.dumps(result))
    (folder / "opened").touch()


def run_pair(exporter: str, importer: str) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="kz-ipc-probe-") as scratch:
        folder = Path(scratch)
        os.chmod(folder, 0o777)
        command = [sys.executable, str(Path(__file__).resolve())]
        sender = subprocess.Popen([*command, "--role", "export", "--place", exporter, "--folder", scratch], stderr=subprocess.PIPE, text=True)
        receiver = subprocess.Popen([*command, "--role", "import", "--place", importer, "--folder", scratch], stderr=subprocess.PIPE, text=True)
        try:
            _, receiver_err = receiver.communicate(timeout=180)
            _, sender_err = sender.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            sender.kill()
            receiver.kill()
            return {"exporter": exporter, "importer": importer, "opened": False, "error": "timed out"}
        result = json.loads((folder / "result.json").read_text()) if (folder / "result.json").exists() else {"opened": False}
        if "error" not in result and not result.get("opened"):
            result["error"] = (receiver_err.strip().splitlines() or sender_err.strip().splitlines() or ["no result"])[-1][:300]
        return {"exporter": exporter, "importer": importer, **result}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=None)
    parser.add_argument("--role", help=argparse.SUPPRESS)
    parser.add_argument("--place", help=argparse.SUPPRESS)
    parser.add_argument("--folder", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.role:
        folder = Path(args.folder)
        enter(args.place, folder)
        (export if args.role == "export" else import_)(folder)
        return
    import torch

    if not torch.cuda.is_available():
        sys.exit("ipc_probe needs an NVIDIA GPU")
    report: dict[str, Any] = {
        "benchmark": "ipc_probe",
        "command": shlex.join([Path(sys.executable).name, *sys.argv]),
        "device": torch.cuda.get_device_name(0),
        "versions": versions(),
        "results": [run_pair(exporter, importer) for exporter, importer in PAIRS],
    }
    print(f"{'exporter':9} {'importer':9} {'pids':>9}  result")
    for row in report["results"]:
        pids = f"{row.get('exporter_pid', '?')}->{row.get('importer_pid', '?')}"
        outcome = ("opened, values match" if row.get("values_match") else "opened, values differ") if row.get("opened") else f"failed: {row.get('error')}"
        print(f"{row['exporter']:9} {row['importer']:9} {pids:>9}  {outcome}")
    write_json(args.out, report)


if __name__ == "__main__":
    main()
