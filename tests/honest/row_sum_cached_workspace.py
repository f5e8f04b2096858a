# problem: 4_row_sum
# style: a workspace for partial sums cached on the module by shape and device and reused across calls (allocated with torch.empty_strided), a chunk kernel and a finishing kernel, and the (rows, 1) output made with torch.empty_strided then returned directly

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def chunk_sums_kernel(x_ptr, ws_ptr, n_cols, stride_x, stride_ws, CHUNK: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    chunk = tl.program_id(1)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for i in range(0, CHUNK, BLOCK):
        cols = chunk * CHUNK + i + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + row * stride_x + cols, mask=cols < n_cols, other=0.0)
    tl.store(ws_ptr + row * stride_ws + chunk, tl.sum(acc, axis=0))


@triton.jit
def finish_kernel(ws_ptr, out_ptr, n_chunks, stride_ws, stride_out, P2: tl.constexpr):
    row = tl.program_id(0)
    idx = tl.arange(0, P2)
    parts = tl.load(ws_ptr + row * stride_ws + idx, mask=idx < n_chunks, other=0.0)
    tl.store(out_ptr + row * stride_out, tl.sum(parts, axis=0))


class ModelNew(nn.Module):
    CHUNK = 2048
    BLOCK = 512

    def __init__(self):
        super().__init__()
        self._workspace = {}

    def _get_workspace(self, rows, n_chunks, device):
        key = (rows, n_chunks, str(device))
        ws = self._workspace.get(key)
        if ws is None:
            ws = torch.empty_strided((rows, n_chunks), (n_chunks, 1), device=device, dtype=torch.float32)
            self._workspace[key] = ws
        return ws

    def forward(self, x):
        x = x.contiguous()
        rows, cols = x.shape
        n_chunks = triton.cdiv(cols, self.CHUNK)
        ws = self._get_workspace(rows, n_chunks, x.device)
        out = torch.empty_strided((rows, 1), (1, 1), device=x.device, dtype=x.dtype)
        chunk_sums_kernel[(rows, n_chunks)](x, ws, cols, x.stride(0), ws.stride(0), CHUNK=self.CHUNK, BLOCK=self.BLOCK)
        finish_kernel[(rows,)](ws, out, n_chunks, ws.stride(0), out.stride(0), P2=triton.next_power_of_2(n_chunks))
        return out
