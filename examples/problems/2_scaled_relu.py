import torch
import torch.nn as nn


class Model(nn.Module):
    """ReLU followed by multiplication with a constant given to the constructor."""

    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x) * self.scale


batch_size = 16
features = 300
scale = 1.5


def get_inputs():
    return [torch.randn(batch_size, features)]


def get_init_inputs():
    return [scale]
