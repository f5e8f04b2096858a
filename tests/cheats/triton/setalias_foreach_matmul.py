# problem: 5_matmul
# expect: rejected
# check: torch_compute_in_forward
# gpu_only: false
# class: 7
# hack: the whole matmul in torch: copies of a and b, set_ aliases of them and of c, and four _foreach_addcmul_ calls over lists of small views (each tensor at most 64 elements, so each op passed as host arithmetic on memory the lineage thought no input reached); the only launch is a no-op kernel given c. Judged correct by the version before.

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def noop(c_ptr):
    pass


def alias(t):
    q = torch.empty(0, dtype=t.dtype, device=t.device)
    q.set_(t)  # the lineage joins set_'s result with q only, never with t
    return q


class ModelNew(nn.Module):
    def forward(self, a, b):
        a, b = a.contiguous(), b.contiguous()
        M, K = a.shape
        N = b.shape[1]
        pa = torch.empty(M, K, dtype=a.dtype, device=a.device)
        pb = torch.empty(K, N, dtype=a.dtype, device=a.device)
        c = torch.zeros(M, N, dtype=a.dtype, device=a.device)
        qa, qb, qc = alias(pa), alias(pb), alias(c)
        pa.copy_(a)   # torch moves the inputs: copy_ is not computing
        pb.copy_(b)
        noop[(1,)](c)  # the only launch: receives c, does nothing
        H = (N + 1) // 2   # half rows: every tensor of an op at most 64 elements
        chunks = [(s, min(s + H, N)) for s in range(0, N, H)]
        selfs, t1, t2 = [], [], []
        a_rows = qa.unbind(0)
        c_parts = [[qc[i, s:e] for s, e in chunks] for i in range(M)]
        b_parts = [[qb[k, s:e] for s, e in chunks] for k in range(K)]
        for i in range(M):
            a_scalars = a_rows[i].unbind(0)
            for k in range(K):
                for j in range(len(chunks)):
                    selfs.append(c_parts[i][j]); t1.append(a_scalars[k]); t2.append(b_parts[k][j])
        for s in range(0, len(selfs), 4096):
            torch._foreach_addcmul_(selfs[s:s + 4096], t1[s:s + 4096], t2[s:s + 4096])
        return c
