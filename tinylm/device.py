"""Pick the compute device once, the same way in every notebook."""
from __future__ import annotations

import os

import torch

ENV_VAR = "TINYLM_DEVICE"


def device(verbose: bool = True) -> torch.device:
    """CUDA if present, then Apple's MPS, then CPU. Set TINYLM_DEVICE (e.g.
    "cpu", "cuda:1") to override, for instance to reproduce a CPU result."""
    requested = os.environ.get(ENV_VAR, "").strip()
    if requested:
        try:
            chosen = torch.device(requested)
        except RuntimeError as err:
            raise ValueError(f"{ENV_VAR}={requested!r} is not a torch device name (try 'cpu', 'cuda', 'cuda:0', 'mps'): {err}") from None
        reason = f"from {ENV_VAR}"
    elif torch.cuda.is_available():
        chosen, reason = torch.device("cuda"), torch.cuda.get_device_name(0)
    elif getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        chosen, reason = torch.device("mps"), "Apple GPU"
    else:
        chosen, reason = torch.device("cpu"), "no CUDA or MPS device found"
    if verbose:
        print(f"tinylm.device(): using {chosen} ({reason})")
    return chosen
