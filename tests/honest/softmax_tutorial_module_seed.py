# problem: 3_row_softmax
# style: laid out as Triton's tutorials are: torch.manual_seed(0) at module level (which runs at import, before any input is drawn), a naive torch softmax kept beside the kernel for comparison, and the local test in an `if __name__ == "__main__":` block
import torch
import torch.nn as nn
import triton
import triton.language as tl

torch.manual_seed(0)


def naive_softmax(x):
    """Compute row-wise softmax of X using native pytorch (for the local test only)."""
    x_max = x.max(dim=1)[0]
    z = x - x_max[:, None]
    numerator = torch.exp(z)
    denominator = numerator.sum(dim=1)
    return numerator / denominator[:, None]


@triton.jit
def softmax_kernel(output_ptr, input_ptr, input_row_stride, output_row_stride, n_cols, BLOCK_SIZE: tl.constexpr):
    row_idx = tl.program_id(0)
    row_start_ptr = input_ptr + row_idx * input_row_stride
    col_offsets = tl.arange(0, BLOCK_SIZE)
    mask = col_offsets < n_cols
    row = tl.load(row_start_ptr + col_offsets, mask=mask, other=-float("inf"))
    row_minus_max = row - tl.max(row, axis=0)
    numerator = tl.exp(row_minus_max)
    softmax_output = numerator / tl.sum(numerator, axis=0)
    tl.store(output_ptr + row_idx * output_row_stride + col_offsets, softmax_output, mask=mask)


def softmax(x):
    n_rows, n_cols = x.shape
    y = torch.empty_like(x)
    softmax_kernel[(n_rows,)](y, x, x.stride(0), y.stride(0), n_cols, BLOCK_SIZE=triton.next_power_of_2(n_cols))
    return y


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return softmax(x.contiguous())


if __name__ == "__main__":
    x = torch.randn(1823, 781)
    assert torch.allclose(softmax(x), naive_softmax(x), atol=1e-6)
