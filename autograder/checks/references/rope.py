"""Reference rotary position embedding (angles, tables, the rotation) for the
checks of RoPE and of the decode step, and what a rotation measured in a
learner's cache says (rotated with the cache, rotated after its update)."""
from __future__ import annotations

import re

import torch


def ref_angles(head_dim: int, positions: torch.Tensor, theta: float) -> torch.Tensor:
    """(T, hd/2) float64 angles pos · theta^(-2i/hd), closed form."""
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    return positions.double()[:, None] * theta ** (-2 * i / head_dim)[None, :]


def ref_rotate(x: torch.Tensor, start_pos: int = 0, theta: float = 10000.0) -> torch.Tensor:
    """Rotate x (B, H, T, hd) as complex pairs (x[i], x[i + hd/2])."""
    hd, T = x.shape[-1], x.shape[-2]
    z = torch.complex(x[..., : hd // 2].double(), x[..., hd // 2:].double())     # (B, H, T, hd/2)
    angles = ref_angles(hd, torch.arange(start_pos, start_pos + T), theta)         # (T, hd/2)
    z = z * torch.polar(torch.ones_like(angles), angles)                          # rotate each pair
    return torch.cat((z.real, z.imag), dim=-1).to(x.dtype)                        # (B, H, T, hd)


def apply_rope_steps(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, start_pos: int = 0) -> torch.Tensor:
    T = x.shape[-2]
    c = cos[start_pos:start_pos + T].to(x.dtype)
    s = sin[start_pos:start_pos + T].to(x.dtype)
    x1, x2 = x.chunk(2, dim=-1)
    rotated = torch.cat((-x2, x1), dim=-1)
    return x * c + rotated * s


# -- RoPE applied after a KV-cache update: read off the learner's own step (notebook 06) ---------------
def rotated_with_the_cache(k_got, k_all, start: int, n: int, offset: int | None) -> str | None:
    """The new keys of an attention step rotated `offset` = 2·start (start_pos
    + T_past) where they belong at start, and the cached keys of its k_all
    rotated a second time from start_pos: the whole cache was rotated after
    the update. The cause, when both are measured; None otherwise."""
    if offset is None or offset != 2 * start or not start:
        return None
    again = ref_rotate(k_all[:, :, :start], start)  # the cached keys rotated a second time, from start_pos
    if not torch.allclose(k_got[:, :, :start].detach().cpu().to(again.dtype), again, atol=1e-4, rtol=1e-4):
        return None
    return (f"RoPE is applied after the cache update (measured: the new keys are rotated for positions {offset}.."
            f"{offset + n - 1}, not {start}..{start + n - 1}, and the cached keys are rotated a second time from "
            f"position {start}): rotate only the new k, at start_pos = T_past, before it joins the cache")


def rotated_after_update(text: str, args: tuple) -> str | None:
    """For an attention step (x, attn, cos, sin, past_k, past_v) that raised
    for positions past the RoPE table: when the rotated tensor has exactly
    T_past + T_new positions (read off the error) and the table covers every
    position the step reaches, the keys were rotated after the cache update,
    and the table's size, which that error blames, is not the problem."""
    m = re.search(r"positions (\d+)\.\.(\d+) exceed the RoPE table of (\d+) positions", text)
    if m is None or len(args) != 6 or not all(isinstance(a, torch.Tensor) for a in (args[0], args[4])):
        return None
    first, last, table = map(int, m.groups())
    new, past = int(args[0].shape[1]), int(args[4].shape[2])
    if last - first + 1 != past + new or past + new > table:
        return None
    return (f"RoPE is applied after the cache update (measured from the error: your code rotates {past + new} "
            f"positions, T_past + T_new = {past} + {new}, from position {first}): the cached keys were rotated when "
            f"they were new, and the table's {table} positions cover every position this step reaches, 0..{past + new - 1}, "
            "so a larger table would not help; rotate only the new q and k, at start_pos = T_past, then add k to the cache")
