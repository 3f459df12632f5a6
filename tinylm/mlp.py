"""SwiGLU: the gated MLP of Llama."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .config import ModelConfig


def swiglu(x: torch.Tensor, w_gate: torch.Tensor, w_up: torch.Tensor, w_down: torch.Tensor) -> torch.Tensor:
    """down(silu(gate(x)) * up(x)), weights in nn.Linear layout [d_out, d_in].

    x (B, T, d) -> gate, up (B, T, d_ff) -> (B, T, d). SiLU goes on the gate
    branch only; the up branch stays linear and is scaled by the gate."""
    gate = F.silu(F.linear(x, w_gate))  # x @ w_gate.T: (B, T, d_ff)
    up = F.linear(x, w_up)              # (B, T, d_ff)
    return F.linear(gate * up, w_down)  # (B, T, d)


class SwiGLU(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.gate_proj = nn.Linear(config.d_model, config.d_ff, bias=False)
        self.up_proj = nn.Linear(config.d_model, config.d_ff, bias=False)
        self.down_proj = nn.Linear(config.d_ff, config.d_model, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(B, T, d) -> (B, T, d), through the module-level swiglu (a notebook can swap it)."""
        return swiglu(x, self.gate_proj.weight, self.up_proj.weight, self.down_proj.weight)
