import torch
import torch.nn as nn


class Model(nn.Module):
    """Elementwise sum of two vectors: out = a + b."""

    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a + b


n = 5000  # deliberately not a power of two: kernels need a bounds mask


def get_inputs():
    return [torch.randn(n), torch.randn(n)]


def get_init_inputs():
    return []
