# problem: 4_row_sum
# style: the launch in a try whose handler logs what failed (the exception, the shapes, exc_info) through a module logger and warnings.warn, then raises again with `raise ... from e`; one program per row with a while loop over column blocks
import logging
import warnings

import torch
import torch.nn as nn
import triton
import triton.language as tl

logger = logging.getLogger(__name__)


@triton.jit
def row_sum_while(x_ptr, out_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    start = 0
    while start < n_cols:
        cols = start + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + row * stride + cols, mask=cols < n_cols, other=0.0)
        start += BLOCK
    tl.store(out_ptr + row, tl.sum(acc, axis=0))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty((x.shape[0], 1), device=x.device, dtype=x.dtype)
        try:
            row_sum_while[(x.shape[0],)](x, out, x.shape[1], x.stride(0), BLOCK=512)
        except Exception as e:
            logger.error("row_sum_while failed for input of shape %s: %s", tuple(x.shape), e, exc_info=True)
            warnings.warn(f"Triton launch failed: {e}", RuntimeWarning)
            raise RuntimeError("row sum kernel failed") from e
        return out
