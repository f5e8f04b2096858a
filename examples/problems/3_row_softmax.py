import torch
import torch.nn as nn


class Model(nn.Module):
    """Softmax over the last dimension of a matrix."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=-1)


rows = 64
cols = 257  # one more than a power of two: the last block of a row is nearly empty


def get_inputs():
    return [torch.randn(rows, cols) * 4.0]


def get_init_inputs():
    return []
