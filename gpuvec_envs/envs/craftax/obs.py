"""Craftax-Classic's symbolic observation, batched.

Mirrors ``render_craftax_symbolic`` in ``craftax/craftax_classic/renderer.py`` (1.6.1): 1345
float32 values per env, in craftax's order:

- the 7 x 9 cells around the player (rows ``-3..3``, columns ``-4..4``; off the map:
  ``OUT_OF_BOUNDS``), each as 17 block one-hot values then 4 mob flags (zombie, cow,
  skeleton, arrow), flattened row by row (``7 * 9 * 21 = 1323``);
- the 12 inventory counts and 4 intrinsics (health, food, drink, energy), each ``/ 10``
  in float16 as XLA:CPU computes it (times float16's 0.1);
- the facing direction one-hot (left, right, up, down), the light level, and sleeping.

Mob flags follow craftax's scatter exactly, including its side effect: each mob slot, in
slot order, writes its on-screen flag (0 for an inactive or off-screen mob) at its local
cell, where jax wraps a negative local index once and drops writes still off the view, so
a slot just above or left of the view can clear a flag set by an earlier slot.
"""

from __future__ import annotations

import torch

from gpuvec_envs.core.constants import table
from gpuvec_envs.envs.craftax._index import wrap
from gpuvec_envs.envs.craftax.constants import OBS_DIM, BlockType
from gpuvec_envs.envs.craftax.state import CraftaxState

NUM_BLOCKS = len(BlockType)
NUM_MOB_TYPES = 4
#: Length of the flat observation.
OBS_SIZE = OBS_DIM[0] * OBS_DIM[1] * (NUM_BLOCKS + NUM_MOB_TYPES) + 12 + 4 + 4 + 2
_PAD = max(OBS_DIM) + 2


def map_view(state: CraftaxState) -> torch.Tensor:
    """The ``(N, 7, 9)`` block types around each player (``OUT_OF_BOUNDS`` off the map)."""
    n, h, w = state.map.shape
    padded = torch.nn.functional.pad(state.map, (_PAD, _PAD, _PAD, _PAD), value=1)
    # dynamic_slice clamps the corner so the window fits the padded map
    r0 = (state.player_position[:, 0] - OBS_DIM[0] // 2 + _PAD).clamp(0, h + 2 * _PAD - OBS_DIM[0])
    c0 = (state.player_position[:, 1] - OBS_DIM[1] // 2 + _PAD).clamp(0, w + 2 * _PAD - OBS_DIM[1])
    rows = r0[:, None] + torch.arange(OBS_DIM[0], device=r0.device)  # (N, 7)
    cols = c0[:, None] + torch.arange(OBS_DIM[1], device=c0.device)  # (N, 9)
    flat = (rows[:, :, None] * (w + 2 * _PAD) + cols[:, None, :]).reshape(n, -1)
    return padded.reshape(n, -1).gather(1, flat).reshape(n, *OBS_DIM)


def mob_view(state: CraftaxState) -> torch.Tensor:
    """The ``(N, 7, 9, 4)`` float32 mob flags of the view, written slot by slot as craftax does."""
    n = state.map.shape[0]
    dev = state.map.device
    out = torch.zeros(n, OBS_DIM[0] * OBS_DIM[1], NUM_MOB_TYPES, dtype=torch.float32, device=dev)
    groups = (
        (state.zombies_position, state.zombies_mask),
        (state.cows_position, state.cows_mask),
        (state.skeletons_position, state.skeletons_mask),
        (state.arrows_position, state.arrows_mask),
    )
    like = state.player_position
    half = table((OBS_DIM[0] // 2, OBS_DIM[1] // 2), dtype=torch.int64, like=like)
    dims = table(tuple(OBS_DIM), dtype=torch.int64, like=like)
    for kind, (position, mask) in enumerate(groups):
        local = position - state.player_position[:, None, :] + half  # (N, slots, 2)
        on_screen = ((local >= 0) & (local < dims)).all(-1) & mask  # (N, slots)
        r = wrap(local[..., 0], OBS_DIM[0])
        c = wrap(local[..., 1], OBS_DIM[1])
        inside = (r >= 0) & (r < OBS_DIM[0]) & (c >= 0) & (c < OBS_DIM[1])
        cell = (r * OBS_DIM[1] + c).clamp(0, OBS_DIM[0] * OBS_DIM[1] - 1)
        channel = out[:, :, kind]
        for slot in range(position.shape[1]):
            idx = cell[:, slot, None]
            old = channel.gather(1, idx)[:, 0]
            new = torch.where(inside[:, slot], on_screen[:, slot].to(torch.float32), old)
            channel = channel.scatter(1, idx, new[:, None])
        out[:, :, kind] = channel
    return out.reshape(n, *OBS_DIM, NUM_MOB_TYPES)


#: float16's nearest value to 0.1 (0.0999755859375).
_TENTH16 = float(torch.tensor(0.1, dtype=torch.float16))


def _tenths(x: torch.Tensor) -> torch.Tensor:
    """The ``x.astype(float16) / 10.0`` of craftax, as float32.

    XLA:CPU turns the float16 division by the constant into a product with float16's 0.1
    (3 / 10 gives 0.2998, not the nearest float16 0.3000); the product of two float16
    values is exact in float32 and is rounded to float16 once, as here: to nearest, ties to
    even, on the float32 bits (inductor drops a float32 -> float16 -> float32 round trip,
    so a cast would not round in a compiled step). Exact for ``|x| <= 2048``, where every
    nonzero product is a normal float16.
    """
    product = x.to(torch.float16).to(torch.float32) * _TENTH16
    bits = product.view(torch.int32)
    bits = (bits + (0x0FFF + ((bits >> 13) & 1))) & ~0x1FFF  # float16 keeps 10 of 23 bits
    return bits.view(torch.float32)


def symbolic_obs(state: CraftaxState) -> torch.Tensor:
    """The symbolic observation of each env, as craftax renders it.

    Args:
        state: The batched state.

    Returns:
        float32 ``(N, 1345)`` in craftax's order (see the module docstring).
    """
    n = state.map.shape[0]
    blocks = torch.nn.functional.one_hot(map_view(state).long(), NUM_BLOCKS).to(torch.float32)
    cells = torch.cat((blocks, mob_view(state)), dim=-1).reshape(n, -1)
    intrinsics = torch.stack(
        (state.player_health, state.player_food, state.player_drink, state.player_energy), -1
    )
    facing = torch.arange(1, 5, device=state.map.device)
    direction = (state.player_direction[:, None] == facing).to(torch.float32)  # jax.nn.one_hot
    tail = torch.stack((state.light_level, state.is_sleeping.to(torch.float32)), -1)
    return torch.cat(
        (cells, _tenths(state.inventory), _tenths(intrinsics), direction, tail), dim=-1
    )
