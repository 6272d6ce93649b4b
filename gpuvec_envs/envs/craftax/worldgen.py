"""Craftax-Classic's world generation, batched: the world craftax builds from each key.

Mirrors ``craftax/craftax_classic/world_gen.py::generate_world`` and
``craftax/craftax_classic/util/noise.py`` (craftax 1.6.1) as jax 0.10.2 computes them on the
CPU: the same key splits (:mod:`._threefry`), Perlin noise in float32 with the same operation
order and no fused multiply-adds (what XLA:CPU emits for it), glibc's ``sinf``/``cosf`` for
the gradients (:mod:`._libm`), and the diamond drawn by jax's ``choice`` with ``p``.

Each function takes the keys of the envs being generated, ``(B, 2)`` int64 (see
:mod:`._threefry`), and generates only those ``B`` worlds.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import torch

from gpuvec_envs.core.constants import table
from gpuvec_envs.envs.craftax import _threefry as tf
from gpuvec_envs.envs.craftax._libm import fma32, round32, sincosf
from gpuvec_envs.envs.craftax.constants import Achievement, Action, BlockType
from gpuvec_envs.envs.craftax.state import CraftaxParams, CraftaxState

#: float32 ``sqrt(2)`` (XLA's correctly rounded square root).
_SQRT2 = float(torch.tensor(2.0, dtype=torch.float32).sqrt())
#: ``2 * jnp.pi`` rounded to float32, as jax multiplies the uniform angles.
_TWO_PI = float(torch.tensor(2 * math.pi, dtype=torch.float32))


@torch.compiler.assume_constant_result
def _recip32(n: int) -> float:
    """float32 ``1 / n`` (a trace-time constant: dynamo calls it as is)."""
    return float(np.float32(1) / np.float32(n))


def _f32(x: float) -> torch.Tensor:
    """A float32 scalar tensor: comparisons and sums then happen in float32, as in jax."""
    return torch.tensor(x, dtype=torch.float32)


def perlin_noise(key: torch.Tensor, shape: tuple[int, int], res: tuple[int, int]) -> torch.Tensor:
    """``generate_perlin_noise_2d(key, shape, res)`` (no ``override_angles``) per key.

    Args:
        key: Keys, int64 ``(B, 2)``.
        shape: Output ``(H, W)``; multiples of ``res`` with ``res / shape`` a power of 2.
        res: Gradient grid ``(R0, R1)`` (``R0 + 1`` x ``R1 + 1`` random angles).

    Returns:
        float32 ``(B, H, W)``, roughly in ``[-1, 1]``.
    """
    d0, d1 = shape[0] // res[0], shape[1] // res[1]
    if d0 * res[0] != shape[0] or d1 * res[1] != shape[1] or d0 & (d0 - 1) or d1 & (d1 - 1):
        raise ValueError(f"shape {shape} must be res {res} times powers of two")
    dev = key.device
    sub = tf.split2(key)[1]
    angles = _TWO_PI * tf.uniform(sub, (res[0] + 1, res[1] + 1))
    sin, cos = sincosf(angles)  # (B, R0 + 1, R1 + 1)
    rows = torch.arange(shape[0], device=dev)
    cols = torch.arange(shape[1], device=dev)
    # the grid: mgrid[0:R0:1/d0, 0:R1:1/d1] % 1, exact in float32
    gx = ((rows % d0).to(torch.float32) / d0)[:, None].expand(shape)
    gy = ((cols % d1).to(torch.float32) / d1)[None, :].expand(shape)
    ci, cj = (rows // d0)[:, None], (cols // d1)[None, :]

    def ramp(di: int, dj: int, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        gcos = cos[:, ci + di, cj + dj]
        gsin = sin[:, ci + di, cj + dj]
        return x * gcos + y * gsin

    n00 = ramp(0, 0, gx, gy)
    n10 = ramp(1, 0, gx - 1, gy)
    n01 = ramp(0, 1, gx, gy - 1)
    n11 = ramp(1, 1, gx - 1, gy - 1)
    tx, ty = _interpolant(gx), _interpolant(gy)
    n0 = n00 * (1 - tx) + tx * n10
    n1 = n01 * (1 - tx) + tx * n11
    return _SQRT2 * ((1 - ty) * n0 + ty * n1)


def _interpolant(t: torch.Tensor) -> torch.Tensor:
    """Perlin's quintic fade ``t^3 (t (6 t - 15) + 10)``, float32 in craftax's order."""
    return t * t * t * (t * (t * 6 - 15) + 10)


def fractal_noise(key: torch.Tensor, shape: tuple[int, int], res: tuple[int, int]) -> torch.Tensor:
    """``generate_fractal_noise_2d(key, shape, res, octaves=1)`` per key, scaled to [0, 1].

    Args:
        key: Keys, int64 ``(B, 2)``.
        shape: Output ``(H, W)``.
        res: Gradient grid of the single octave.

    Returns:
        float32 ``(B, H, W)``, ``(noise - min) / (max - min)`` per world.
    """
    noise = perlin_noise(tf.split2(key)[1], shape, res)
    lo = noise.amin(dim=(1, 2), keepdim=True)
    hi = noise.amax(dim=(1, 2), keepdim=True)
    return (noise - lo) / (hi - lo)


def light_level(timestep: torch.Tensor, params: CraftaxParams) -> torch.Tensor:
    """``calculate_light_level(timestep, params)`` in a step, float32 ``(N,)``.

    ``1 - |cos(pi * ((t / day_length) % 1 + 0.3))|^3`` as XLA:CPU compiles it: the division
    by the constant day length becomes a product with its float32 reciprocal, the cosine is
    glibc's ``cosf``, and ``1 - c * c^2`` is one fused multiply-add.
    """
    inverse = _recip32(params.day_length)
    progress = (timestep.to(torch.float32) * inverse) % 1 + round32(0.3)
    c = sincosf(progress * round32(math.pi))[1].abs()
    return fma32(-c, c * c, 1.0)


@functools.cache
def initial_light_level(params: CraftaxParams) -> float:
    """The light level of a new world (computed once per params, not per reset).

    craftax passes the Python int 0, so the progress is a Python float and XLA folds the
    rest to a constant (its evaluator: glibc's ``cosf``, separate roundings).
    """
    progress = (0 / params.day_length) % 1 + 0.3
    c = sincosf(torch.tensor([math.pi * progress], dtype=torch.float32))[1].abs()
    return float((1 - c * (c * c))[0])


def generate_world(key: torch.Tensor, params: CraftaxParams | None = None) -> CraftaxState:
    """``generate_world(key, params, static_params)`` for each key: new worlds at step 0.

    Args:
        key: Keys, int64 ``(B, 2)``, what craftax's ``reset_env`` receives.
        params: The env's parameters (craftax's defaults if None; only the 64 x 64 map).

    Returns:
        The ``B`` generated states.
    """
    params = CraftaxParams() if params is None else params
    if params.map_size != (64, 64):
        raise ValueError(f"only craftax's 64x64 map is supported, got {params.map_size}")
    b = key.shape[0]
    dev = key.device
    h, w = params.map_size
    shape = (h, w)
    player = (h // 2, w // 2)
    rows = torch.arange(h, device=dev)[:, None]
    cols = torch.arange(w, device=dev)[None, :]
    dist = ((rows - player[0]).abs() + (cols - player[1]).abs()).to(torch.float32)
    proximity = (dist / 5.0).clamp(0.0, 1.0)  # (H, W)
    small_res, larger_res, x_res = (h // 16, w // 16), (h // 4, w // 4), (h // 8, w // 2)
    g, wt, st, pa = (
        int(BlockType.GRASS),
        int(BlockType.WATER),
        int(BlockType.STONE),
        int(BlockType.PATH),
    )

    rng, sub = tf.split2(key)
    water = fractal_noise(sub, shape, small_res) + proximity - 1.0
    rng, _ = tf.split2(rng)
    world = torch.where(water > _f32(0.7), wt, g)
    sand = (water < _f32(0.75)) & (water > _f32(0.6)) & (world != wt)
    world = torch.where(sand, int(BlockType.SAND), world)

    rng, sub = tf.split2(rng)
    mountain = fractal_noise(sub, shape, small_res) + _f32(0.05) + proximity - 1.0
    high = mountain > _f32(0.7)
    world = torch.where(high, st, world)

    rng, sub = tf.split2(rng)
    path_x = fractal_noise(sub, shape, x_res)
    world = torch.where(high & (path_x > _f32(0.8)), pa, world)
    world = torch.where(high & (path_x.transpose(1, 2) > _f32(0.8)), pa, world)

    rng, _ = tf.split2(rng)
    world = torch.where((mountain > _f32(0.85)) & (water > _f32(0.4)), pa, world)

    rng, sub = tf.split2(rng)
    world = torch.where(
        (world == st) & (tf.uniform(sub, shape) < _f32(0.04)), int(BlockType.COAL), world
    )
    rng, sub = tf.split2(rng)
    world = torch.where(
        (world == st) & (tf.uniform(sub, shape) < _f32(0.03)), int(BlockType.IRON), world
    )
    rng, sub = tf.split2(rng)
    diamond = (mountain > _f32(0.8)) & (tf.uniform(sub, shape) < _f32(0.005)) & (world == st)
    world = torch.where(diamond, int(BlockType.DIAMOND), world)

    rng, sub = tf.split2(rng)
    tree_noise = fractal_noise(sub, shape, larger_res)
    tree = (tree_noise > _f32(0.5)).to(torch.float32) * tf.uniform(rng, shape) > _f32(0.8)
    world = torch.where(tree & (world == g), int(BlockType.TREE), world)
    world = torch.where(
        (mountain > _f32(0.85)) & (tree_noise > _f32(0.7)), int(BlockType.LAVA), world
    )
    world[:, player[0], player[1]] = g

    # one guaranteed diamond (or stone) on a stone cell, drawn by choice with p
    flat = world.reshape(b, h * w)
    rng, sub = tf.split2(rng)
    # choice(arange(h * w), p=stone / stone.sum()); h * w where no stone (the write drops)
    index = tf.choice_in_mask(sub, flat == st)
    block = int(BlockType.DIAMOND) if params.always_diamond else st
    hit = index < h * w
    current = flat.gather(1, index.clamp(max=h * w - 1)[:, None])
    flat = flat.scatter(
        1, index.clamp(max=h * w - 1)[:, None], torch.where(hit[:, None], block, current)
    )
    world = flat.reshape(b, h, w)
    state_rng = tf.split2(rng)[1]
    return _initial_state(world.to(torch.uint8), state_rng, params)


def _initial_state(
    world: torch.Tensor, state_rng: torch.Tensor, params: CraftaxParams
) -> CraftaxState:
    """The step-0 state around a generated map ``(B, H, W)`` uint8: craftax's start values."""
    b, h, w = world.shape
    dev = world.device

    def zeros(*s: int, dtype: torch.dtype = torch.int64) -> torch.Tensor:
        return torch.zeros(b, *s, dtype=dtype, device=dev)

    def full(value: float, *s: int, dtype: torch.dtype = torch.int64) -> torch.Tensor:
        return torch.full((b, *s), value, dtype=dtype, device=dev)

    z, c, s, a, p = (
        params.max_zombies,
        params.max_cows,
        params.max_skeletons,
        params.max_arrows,
        params.max_growing_plants,
    )
    return CraftaxState(
        map=world,
        mob_map=zeros(h, w, dtype=torch.bool),
        player_position=table((h // 2, w // 2), dtype=torch.int64, like=world).expand(b, 2).clone(),
        player_direction=full(int(Action.UP)),
        player_health=full(9),
        player_food=full(9),
        player_drink=full(9),
        player_energy=full(9),
        is_sleeping=zeros(dtype=torch.bool),
        player_recover=zeros(dtype=torch.float32),
        player_hunger=zeros(dtype=torch.float32),
        player_thirst=zeros(dtype=torch.float32),
        player_fatigue=zeros(dtype=torch.float32),
        inventory=zeros(12),
        zombies_position=zeros(z, 2),
        zombies_health=full(1, z),
        zombies_mask=zeros(z, dtype=torch.bool),
        zombies_attack_cooldown=zeros(z),
        cows_position=zeros(c, 2),
        cows_health=full(params.cow_health, c),
        cows_mask=zeros(c, dtype=torch.bool),
        cows_attack_cooldown=zeros(c),
        skeletons_position=zeros(s, 2),
        skeletons_health=zeros(s),
        skeletons_mask=zeros(s, dtype=torch.bool),
        skeletons_attack_cooldown=zeros(s),
        arrows_position=zeros(a, 2),
        arrows_health=zeros(a),
        arrows_mask=zeros(a, dtype=torch.bool),
        arrows_attack_cooldown=zeros(a),
        arrow_directions=full(1, a, 2),
        growing_plants_positions=zeros(p, 2),
        growing_plants_age=zeros(p),
        growing_plants_mask=zeros(p, dtype=torch.bool),
        light_level=full(initial_light_level(params), dtype=torch.float32),
        achievements=zeros(len(Achievement), dtype=torch.bool),
        state_rng=state_rng,
        timestep=zeros(),
    )
