"""Craftax-Classic's pixel rendering, batched: the pixel observation and ``rgb_array`` frames.

Mirrors ``make_craftax_pixel_renderer`` in ``craftax/craftax_classic/renderer.py`` (craftax
1.6.1), as XLA:CPU computes it: the ``(7 + 2) x 9`` blocks of ``s`` pixels (the 7 x 9 view
and two inventory rows), float32 values in ``[0, 255]``:

1. each cell of the view in its block's texture (``OUT_OF_BOUNDS`` grey off the map);
2. the player on the centre cell (facing texture, or sleeping), alpha-blended;
3. mobs alpha-blended on their cells, slot by slot: zombies, cows, skeletons, arrows (the
   arrow texture flipped and transposed to its direction);
4. night: below light level 0.5, static noise (``jax.random.uniform(state.state_rng,
   (H, W)) * 95 + 32``, stronger towards the edges) mixed in, then desaturated, tinted
   blue and blended with the day picture by the light level;
5. sleeping: grey with a blue tint;
6. the inventory rows: health, food, drink, energy, sapling, wood, stone, coal, iron,
   diamond and the six tools, each icon (or nothing at 0) with its count's digit.

The night noise reads the state's key without consuming it (craftax renders from
``state.state_rng``; the key a step draws from is unchanged). Where XLA:CPU contracts a
product and a sum into one fused multiply-add, :func:`~gpuvec_envs.envs.craftax._libm.fma32`
does the same, so the values are craftax's bit for bit.

Textures are craftax's, as its loader builds them, stored as uint8 arrays in
``assets/textures.npz`` (written by ``tools/craftax_textures.py``; craftax's MIT license in
``assets/CRAFTAX_LICENSE``): only torch and numpy are needed here.
"""

from __future__ import annotations

import dataclasses
import functools
import pathlib

import numpy as np
import torch

from gpuvec_envs.core.constants import table, traced
from gpuvec_envs.envs.craftax import _threefry as tf
from gpuvec_envs.envs.craftax._libm import fma32, round32
from gpuvec_envs.envs.craftax.constants import INVENTORY, OBS_DIM
from gpuvec_envs.envs.craftax.obs import map_view
from gpuvec_envs.envs.craftax.state import CraftaxState

#: Block size of the pixel observation [px] (craftax's ``BLOCK_PIXEL_SIZE_AGENT``).
AGENT_BLOCK = 7
#: Block size of ``rgb_array`` frames [px] (``BLOCK_PIXEL_SIZE_HUMAN``, craftax's play script).
HUMAN_BLOCK = 64
#: Rows of inventory blocks under the view (``INVENTORY_OBS_HEIGHT``).
INVENTORY_ROWS = 2
#: The inventory's 16 slots, in ``assets/textures.npz``'s icon order: the value shown (an
#: intrinsic or an ``INVENTORY`` column) and the (column, row) block of the slot.
INVENTORY_SLOTS: tuple[tuple[str, int, int], ...] = (
    ("player_health", 0, 0),
    ("player_food", 1, 0),
    ("player_drink", 2, 0),
    ("player_energy", 3, 0),
    ("sapling", 4, 0),
    ("wood", 5, 0),
    ("stone", 6, 0),
    ("coal", 7, 0),
    ("iron", 8, 0),
    ("diamond", 0, 1),
    ("wood_pickaxe", 1, 1),
    ("stone_pickaxe", 2, 1),
    ("iron_pickaxe", 3, 1),
    ("wood_sword", 4, 1),
    ("stone_sword", 5, 1),
    ("iron_sword", 6, 1),
)
#: craftax's luminance weights and enhance factor, as float32 (its Python floats, weakly typed)
_R, _G, _B = round32(0.299), round32(0.587), round32(0.114)
_ENHANCE, _1_ENHANCE = round32(0.4), round32(1 - 0.4)
#: Half of craftax's night tint ``(0, 16, 64)`` and of its sleep tint ``(0, 0, 16)``.
_NIGHT_TINT = (0.0, 8.0, 32.0)
_SLEEP_TINT = (0.0, 0.0, 8.0)
#: Inventory cell (row * 9 + column) of each slot.
_SLOT_CELLS = tuple(row * OBS_DIM[1] + col for _, col, row in INVENTORY_SLOTS)
_ASSETS = pathlib.Path(__file__).resolve().parent / "assets"


def frame_shape(block: int) -> tuple[int, int, int]:
    """``(H, W, 3)`` of a frame of ``block``-pixel blocks: ``(9 block, 9 block, 3)``."""
    return ((OBS_DIM[0] + INVENTORY_ROWS) * block, OBS_DIM[1] * block, 3)


@functools.cache
def _arrays(block: int) -> dict[str, np.ndarray]:
    """The uint8 texture arrays of one block size (see ``tools/craftax_textures.py``)."""
    with np.load(_ASSETS / "textures.npz") as z:
        return {k.split("/")[1]: z[k] for k in z.files if k.startswith(f"{block}/")}


def night_noise_mask(block: int) -> np.ndarray:
    """float32 ``(7 block, 9 block)``: ``night_noise_intensity_texture``, craftax's numpy code."""
    xs, ys = np.meshgrid(
        np.linspace(-1, 1, OBS_DIM[0] * block), np.linspace(-1, 1, OBS_DIM[1] * block)
    )
    return (1 - np.exp(-0.5 * (xs**2 + ys**2) / (0.5**2)).T).astype(np.float32)


@dataclasses.dataclass(frozen=True)
class Textures:
    """Craftax's textures at one block size ``s`` on one device (see :func:`textures`)."""

    block: torch.Tensor  # (17, s, s, 3) float32 0-255
    player: torch.Tensor  # (5, s, s, 3) float32 0-255: left, right, up, down, sleeping
    player_alpha: torch.Tensor  # (5, s, s, 1) float32 0-1 (alpha / 255)
    mobs: torch.Tensor  # (3, s, s, 3) float32: zombie, cow, skeleton
    mobs_alpha: torch.Tensor  # (3, s, s, 1) float32 0-1
    arrows: torch.Tensor  # (4, s, s, 3) float32 by direction: up, down, left, right
    arrows_alpha: torch.Tensor  # (4, s, s, 1) bool
    inventory: torch.Tensor  # (16, 2, 10, s, s, 3) float32: slot, has-item, digit
    noise_mask: torch.Tensor  # (7 s, 9 s, 1) float32 0-1

    @property
    def size(self) -> int:
        """Block size [px]."""
        return self.block.shape[1]


def _inventory_tiles(a: dict[str, np.ndarray], s: int) -> np.ndarray:
    """Every inventory block as craftax draws it: ``(16, 2, 10, s, s, 3)`` float32.

    Slot ``k`` with (``has``: its value ``> 0``) its icon or nothing, then digit ``d``
    (0: none): pixels under the digit's alpha cleared, the digit's colour added.
    """
    sm, ns = int(s * 0.8), int(s * 0.6)
    left = (s - sm) // 2 - 1
    off = s - ns - 1  # craftax's number_offset - 1
    out = np.zeros((16, 2, 10, s, s, 3), np.float32)
    out[:, 1, :, left : left + sm, left : left + sm] = a["icons"][:, None].astype(np.float32)
    digit, alpha = a["digits"][..., :3], a["digits"][..., 3:]
    region = out[..., off : off + ns, off : off + ns, :]
    region *= 1 - alpha.astype(np.float32)
    region += digit.astype(np.float32)
    return out


def textures(block: int, like: torch.Tensor | torch.device) -> Textures:
    """Craftax's textures of ``block``-pixel blocks (7 or 64) on a tensor's (or a) device.

    Eager calls share one set per (size, device); inside a compiler trace (a ``like``
    tensor that is traced) they are built afresh, so the trace records them as constants.
    """
    if isinstance(like, torch.Tensor):
        if traced(like):
            return _build(block, like.device)
        like = like.device
    return _cached(block, torch.device(like))


@functools.cache
def _cached(block: int, device: torch.device) -> Textures:
    return _build(block, device)


def _build(block: int, device: torch.device) -> Textures:
    """The textures of ``block``-pixel blocks on ``device``."""
    a = _arrays(block)
    if not a:
        raise ValueError(f"no textures of block size {block}; sizes: {AGENT_BLOCK}, {HUMAN_BLOCK}")

    def f(x: np.ndarray) -> torch.Tensor:
        return torch.as_tensor(np.ascontiguousarray(x)).to(device=device, dtype=torch.float32)

    up, up_alpha = a["arrow"][..., :3], a["arrow"][..., 3:] > 0
    down, down_alpha = up[::-1], up_alpha[::-1]
    # craftax flips when the direction has a positive component, transposes when it is
    # horizontal: up (-1, 0), down (1, 0), left (0, -1), right (0, 1)
    arrows = np.stack((up, down, up.transpose(1, 0, 2), down.transpose(1, 0, 2)))
    arrows_alpha = np.stack(
        (up_alpha, down_alpha, up_alpha.transpose(1, 0, 2), down_alpha.transpose(1, 0, 2))
    )
    return Textures(
        block=f(a["block"]),
        player=f(a["player"][..., :3]),
        player_alpha=f(a["player"][..., 3:]) / 255,
        mobs=f(a["mobs"][..., :3]),
        mobs_alpha=f(a["mobs"][..., 3:]) / 255,
        arrows=f(arrows),
        arrows_alpha=torch.as_tensor(np.ascontiguousarray(arrows_alpha)).to(device),
        inventory=f(_inventory_tiles(a, block)),
        noise_mask=f(night_noise_mask(block)[..., None]),
    )


def _blocks_to_image(tiles: torch.Tensor) -> torch.Tensor:
    """``(N, R, C, s, s, 3)`` blocks as ``(N, R s, C s, 3)`` images."""
    n, r, c, s, _, ch = tiles.shape
    return tiles.permute(0, 1, 3, 2, 4, 5).reshape(n, r * s, c * s, ch)


def _blend(under: torch.Tensor, colour: torch.Tensor, alpha: torch.Tensor) -> torch.Tensor:
    """``under * (1 - alpha) + colour * alpha`` as XLA:CPU computes it (float32)."""
    return fma32(under, 1 - alpha, colour * alpha)


def _draw_cell(
    image: torch.Tensor,
    local: torch.Tensor,
    on: torch.Tensor,
    colour: torch.Tensor,
    alpha: torch.Tensor,
    exact_alpha: bool,
) -> torch.Tensor:
    """Blend an ``s x s`` sprite onto view cell ``local`` of each image, where ``on``.

    Args:
        image: float32 ``(N, H, W, 3)``, the view's pixels (modified in place).
        local: int64 ``(N, 2)`` cell in the 7 x 9 view.
        on: bool ``(N,)``; False leaves the image as it is (craftax blends a null sprite).
        colour: float32 ``(N, s, s, 3)``.
        alpha: ``(N, s, s, 1)``: float32 in ``[0, 1]``, or bool if ``exact_alpha``.
        exact_alpha: The alpha is 0/1: the sprite's colour replaces the pixels where set.

    Returns:
        ``image``.
    """
    n, h, w, _ = image.shape
    s = colour.shape[1]
    dev = image.device
    # dynamic_slice clamps the corner into the image (only reached by null sprites)
    r0 = (local[:, 0] * s).clamp(0, h - s)
    c0 = (local[:, 1] * s).clamp(0, w - s)
    ar = torch.arange(s, device=dev)
    flat = ((r0[:, None] + ar)[:, :, None] * w + (c0[:, None] + ar)[:, None, :]).reshape(n, -1)
    pixels = image.view(n, h * w, 3)
    index = flat[:, :, None].expand(n, s * s, 3)
    under = pixels.gather(1, index).view(n, s, s, 3)
    if exact_alpha:
        new = torch.where(alpha, colour, under)
    else:
        new = _blend(under, colour, alpha)
    new = torch.where(on[:, None, None, None], new, under)
    pixels.scatter_(1, index, new.reshape(n, s * s, 3))
    return image


def _luminance(x: torch.Tensor) -> torch.Tensor:
    """``0.299 r + 0.587 g + 0.114 b`` of ``(..., 3)`` float32 as XLA:CPU fuses it."""
    r, g, b = x.unbind(-1)
    return fma32(b, _B, fma32(r, _R, g * _G))


def render_pixels(state: CraftaxState, tex: Textures) -> torch.Tensor:
    """Craftax's ``render_craftax_pixels`` of each state.

    Args:
        state: The batched state.
        tex: Textures of the block size to draw (:func:`textures`).

    Returns:
        float32 ``(N, 9 s, 9 s, 3)`` pixel values in ``[0, 255]`` (not rounded).
    """
    n = state.map.shape[0]
    s = tex.size
    dev = state.map.device
    view = map_view(state).long()  # (N, 7, 9)
    image = _blocks_to_image(tex.block[view]).contiguous()  # (N, 7 s, 9 s, 3)
    h, w = image.shape[1:3]
    half = table((OBS_DIM[0] // 2, OBS_DIM[1] // 2), dtype=torch.int64, like=view)

    # player: on the centre cell
    facing = torch.where(state.is_sleeping, 4, state.player_direction - 1)
    _draw_cell(
        image,
        half.expand(n, 2),
        torch.ones(n, dtype=torch.bool, device=dev),
        tex.player[facing],
        tex.player_alpha[facing],
        exact_alpha=False,
    )

    # mobs, slot by slot
    dims = table(OBS_DIM, dtype=torch.int64, like=view)
    groups = (
        (state.zombies_position, state.zombies_mask, 0),
        (state.cows_position, state.cows_mask, 1),
        (state.skeletons_position, state.skeletons_mask, 2),
    )
    for position, mask, kind in groups:
        for slot in range(position.shape[1]):
            local = position[:, slot] - state.player_position + half
            on = ((local >= 0) & (local < dims)).all(-1) & mask[:, slot]
            colour = tex.mobs[kind].expand(n, s, s, 3)
            alpha = tex.mobs_alpha[kind].expand(n, s, s, 1)
            _draw_cell(image, local, on, colour, alpha, exact_alpha=False)
    d = state.arrow_directions
    # up, down, left, right: flip if a component is positive, transpose if horizontal
    arrow_kind = (d[..., 1] != 0).long() * 2 + ((d[..., 0] > 0) | (d[..., 1] > 0)).long()
    for slot in range(state.arrows_position.shape[1]):
        local = state.arrows_position[:, slot] - state.player_position + half
        on = ((local >= 0) & (local < dims)).all(-1) & state.arrows_mask[:, slot]
        k = arrow_kind[:, slot]
        _draw_cell(image, local, on, tex.arrows[k], tex.arrows_alpha[k], exact_alpha=True)

    # night (XLA:CPU contracts the products and sums marked fma32; where it adds a product
    # by 0.5 or by 0/1, the float32 operations are already exact)
    light = state.light_level[:, None, None, None]  # (N, 1, 1, 1) float32
    static = torch.clamp(2 * (0.5 - light), min=0.0)
    noise = fma32(tf.uniform(state.state_rng, (h, w))[..., None], 95.0, 32.0)  # (N, H, W, 1)
    mask = static * tex.noise_mask
    with_static = fma32(mask, noise, (1 - mask) * image)
    night = torch.where(light < 0.5, with_static, image)
    night = fma32(night, _ENHANCE, _1_ENHANCE * _luminance(night)[..., None])
    night = 0.5 * night + table(_NIGHT_TINT, dtype=torch.float32, like=night)
    image = fma32(light, image, (1 - light) * night)

    # sleeping
    sleep = 0.5 * _luminance(image)[..., None] + table(_SLEEP_TINT, dtype=torch.float32, like=image)
    image = torch.where(state.is_sleeping[:, None, None, None], sleep, image)

    # inventory
    intrinsics = {
        "player_health": state.player_health,
        "player_food": state.player_food,
        "player_drink": state.player_drink,
        "player_energy": state.player_energy,
    }
    values = torch.stack(
        [
            intrinsics[name] if name in intrinsics else state.inventory[:, INVENTORY.index(name)]
            for name, _, _ in INVENTORY_SLOTS
        ],
        -1,
    )  # (N, 16)
    # jax indexes the digits with the value: a negative one wraps once, then clamps
    digit = torch.where(values < 0, values + 10, values).clamp(0, 9)
    slot = torch.arange(len(INVENTORY_SLOTS), device=dev)
    tiles = tex.inventory[slot, (values > 0).long(), digit]  # (N, 16, s, s, 3)
    cells = torch.zeros(n, INVENTORY_ROWS * OBS_DIM[1], s, s, 3, device=dev)
    where = table(_SLOT_CELLS, dtype=torch.int64, like=view)
    cells[:, where] = tiles
    inventory = _blocks_to_image(cells.view(n, INVENTORY_ROWS, OBS_DIM[1], s, s, 3))
    return torch.cat((image, inventory), 1)
