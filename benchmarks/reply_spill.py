"""What a reply received past the parent's reply budget costs (``wire.ReplyMemory``):
a worker-sized reply of one tensor sent over a socket pair, received into memory (budget
large enough) and into an unnamed mapped file (budget 0), then read once (a sum) as the
judge would; and the same tensor copied by the sender into a memory file the receiver
lent and then sealed and mapped (``wire.LentFile``, the forty-sixth session's route for a
reply's large tensors). Rounds alternate so that a busy machine weighs on all alike. Usage:

    python benchmarks/reply_spill.py --mib 256 512 --rounds 3
    python benchmarks/reply_spill.py --mib 1024 --spill-dir /var/tmp --out results/reply_spill.json
"""

from __future__ import annotations

import argparse
import gc
import socket
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import versions, write_json  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, nargs="+", default=[256, 512])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--spill-dir", default=None, help="where spilled replies go (default: the system's temporary folder)")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()

    import torch

    from kz_core.evaluate import wire

    rows = []
    for mib in args.mib:
        sent = torch.ones(mib << 18, dtype=torch.float32)  # mib MiB
        times: dict[str, list[float]] = {"memory": [], "spilled": [], "lent": []}
        for _ in range(args.rounds):
            for how, budget in (("memory", 1 << 62), ("spilled", 0), ("lent", 1 << 62)):
                memory = wire.ReplyMemory(budget, spill_dir=args.spill_dir)
                a, b = socket.socketpair()
                started = time.perf_counter()
                lent = wire.LentFile.create(2 * sent.nbytes) if how == "lent" else None
                if lent is None:
                    sender = threading.Thread(target=wire.send_reply, args=(a, {"out": sent}))
                else:
                    sender = threading.Thread(target=lambda: wire.send_frame(a, wire.encode_reply({"out": sent}, lent)))
                sender.start()
                reply = wire.recv_reply(b, memory=memory, lent=lent)
                total = float(reply["out"].sum())
                times[how].append(time.perf_counter() - started)
                sender.join()
                if lent is not None:
                    lent.close()
                assert total == sent.numel() and memory.spilled == (how == "spilled")
                del reply
                gc.collect()
                a.close()
                b.close()
        row = {"mib": mib, **{f"{how}_s": round(statistics.median(values), 3) for how, values in times.items()}}
        row["spilled_over_memory"] = round(row["spilled_s"] / row["memory_s"], 2)
        row["lent_over_memory"] = round(row["lent_s"] / row["memory_s"], 2)
        rows.append(row)
        print(
            f"{mib} MiB: memory {row['memory_s']} s, spilled {row['spilled_s']} s ({row['spilled_over_memory']}x),"
            f" lent {row['lent_s']} s ({row['lent_over_memory']}x), median of {args.rounds}"
        )
    write_json(args.out, {"benchmark": "reply_spill", "spill_dir": args.spill_dir or "system temporary folder", "versions": versions(), "rows": rows})


if __name__ == "__main__":
    main()
