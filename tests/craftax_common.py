"""Shared helpers for the Craftax-Classic parity tests (craftax 1.6.1, jax 0.10.2 on CPU).

- :func:`to_craftax`: our batched :class:`CraftaxState` as craftax's batched ``EnvState``
  (jax arrays, craftax's dtypes), for state injection: run a craftax function under
  ``jax.vmap`` on the same states as ours;
- :func:`reference_fields`: a batched ``EnvState`` as our flat fields (numpy);
- :func:`check_state`: every field equal, floats bit for bit;
- :func:`random_states`: varied states around generated worlds (players on the border,
  mobs in and around the view, inventories, intrinsics, plants, sleeping, timesteps).

Import only after ``pytest.importorskip("craftax")``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import torch
from craftax.craftax_classic.envs.craftax_state import EnvState, Inventory, Mobs

from gpuvec_envs.envs.craftax import _threefry as tf
from gpuvec_envs.envs.craftax.state import CraftaxParams, CraftaxState
from gpuvec_envs.envs.craftax.worldgen import generate_world, light_level

MOBS = ("zombies", "cows", "skeletons", "arrows")
INVENTORY = (
    "wood stone coal iron diamond sapling wood_pickaxe stone_pickaxe iron_pickaxe wood_sword "
    "stone_sword iron_sword"
).split()


def _mob_field(name: str) -> tuple[str, str] | None:
    group = name.split("_")[0]
    if group in MOBS and name != "arrow_directions":
        return group, name[len(group) + 1 :]
    return None


def reference_fields(ref) -> dict[str, np.ndarray]:
    """craftax's batched EnvState as our CraftaxState's flat fields (numpy)."""
    out = {}
    for name in CraftaxState._fields:
        mob = _mob_field(name)
        if name == "inventory":
            value = np.stack([np.asarray(getattr(ref.inventory, f)) for f in INVENTORY], -1)
        elif mob is not None:
            value = getattr(getattr(ref, mob[0]), mob[1])
        else:
            value = getattr(ref, name)
        out[name] = np.asarray(value)
    return out


def to_craftax(state: CraftaxState) -> EnvState:
    """Our batched state as craftax's batched EnvState (int32 / float32 / bool / uint32 key)."""

    def j(x: torch.Tensor):
        a = x.cpu().numpy()
        if a.dtype == np.bool_ or a.dtype == np.float32:
            return jnp.asarray(a)
        return jnp.asarray(a.astype(np.int32))

    f = {name: value for name, value in zip(state._fields, state, strict=True)}
    mobs = {
        group: Mobs(
            position=j(f[f"{group}_position"]),
            health=j(f[f"{group}_health"]),
            mask=j(f[f"{group}_mask"]),
            attack_cooldown=j(f[f"{group}_attack_cooldown"]),
        )
        for group in MOBS
    }
    inv = state.inventory
    return EnvState(
        map=j(state.map),
        mob_map=j(state.mob_map),
        player_position=j(state.player_position),
        player_direction=j(state.player_direction),
        player_health=j(state.player_health),
        player_food=j(state.player_food),
        player_drink=j(state.player_drink),
        player_energy=j(state.player_energy),
        is_sleeping=j(state.is_sleeping),
        player_recover=j(state.player_recover),
        player_hunger=j(state.player_hunger),
        player_thirst=j(state.player_thirst),
        player_fatigue=j(state.player_fatigue),
        inventory=Inventory(**{k: j(inv[:, i]) for i, k in enumerate(INVENTORY)}),
        zombies=mobs["zombies"],
        cows=mobs["cows"],
        skeletons=mobs["skeletons"],
        arrows=mobs["arrows"],
        arrow_directions=j(state.arrow_directions),
        growing_plants_positions=j(state.growing_plants_positions),
        growing_plants_age=j(state.growing_plants_age),
        growing_plants_mask=j(state.growing_plants_mask),
        light_level=j(state.light_level),
        achievements=j(state.achievements),
        state_rng=jnp.asarray(state.state_rng.cpu().numpy().astype(np.uint32)),
        timestep=j(state.timestep),
    )


def check_state(ours: CraftaxState, ref, fields: tuple[str, ...] | None = None) -> None:
    """Every (or each named) field of our batched state equal to craftax's, exact."""
    expected = reference_fields(ref)
    for name, value in zip(ours._fields, ours, strict=True):
        if fields is not None and name not in fields:
            continue
        want = expected[name]
        got = value.cpu().numpy()
        if want.dtype == np.bool_:
            assert got.dtype == np.bool_, name
            np.testing.assert_array_equal(got, want, name)
        elif want.dtype.kind == "f":
            assert got.dtype == np.float32, name
            np.testing.assert_array_equal(got.view(np.int32), want.view(np.int32), name)
        else:
            assert got.dtype.kind in "iu", name
            np.testing.assert_array_equal(got.astype(np.int64), want.astype(np.int64), name)


def random_states(seed: int, n: int) -> CraftaxState:
    """``n`` varied states: generated worlds with randomised player, mobs, inventory, plants.

    A quarter of the players stand on the map's border; mobs are scattered in and around
    the 7 x 9 view (active or not); blocks of every type are sprinkled near the player.
    """
    g = torch.Generator().manual_seed(seed)

    def ri(lo: int, hi: int, *shape: int) -> torch.Tensor:
        return torch.randint(lo, hi, shape, generator=g)

    def rb(p: float, *shape: int) -> torch.Tensor:
        return torch.rand(shape, generator=g) < p

    s = generate_world(tf.prng_key(ri(0, 2**31, n)))
    pos = ri(0, 64, n, 2)
    border = rb(0.25, n)
    side = ri(0, 4, n)
    edge = torch.stack(
        (
            torch.where(side == 0, 0, torch.where(side == 1, 63, pos[:, 0])),
            torch.where(side == 2, 0, torch.where(side == 3, 63, pos[:, 1])),
        ),
        -1,
    )
    pos = torch.where(border[:, None], edge, pos)
    world = s.map.clone()
    near = (pos[:, None, :] + ri(-4, 5, n, 30, 2)).clamp(0, 63)
    world[torch.arange(n)[:, None], near[..., 0], near[..., 1]] = ri(2, 17, n, 30).to(torch.uint8)

    def mobs(k: int) -> tuple[torch.Tensor, ...]:
        p = pos[:, None, :] + ri(-6, 7, n, k, 2)
        return p, ri(0, 6, n, k), rb(0.6, n, k), ri(0, 6, n, k)

    z, c, sk, a = mobs(3), mobs(3), mobs(2), mobs(3)
    mob_map = torch.zeros(n, 64, 64, dtype=torch.bool)
    for p, _, m, _ in (z, c, sk):
        inside = m & (p >= 0).all(-1) & (p < 64).all(-1)
        rows, cols = p[..., 0].clamp(0, 63), p[..., 1].clamp(0, 63)
        mob_map[torch.arange(n)[:, None], rows, cols] |= inside
    plants = (pos[:, None, :] + ri(-3, 4, n, 10, 2)).clamp(0, 63)
    timestep = ri(0, 10_000, n)
    return s._replace(
        map=world,
        mob_map=mob_map,
        player_position=pos,
        player_direction=ri(1, 5, n),
        player_health=ri(0, 10, n),
        player_food=ri(0, 10, n),
        player_drink=ri(0, 10, n),
        player_energy=ri(0, 10, n),
        is_sleeping=rb(0.2, n),
        player_recover=ri(-30, 52, n).to(torch.float32) / 2,
        player_hunger=ri(0, 52, n).to(torch.float32) / 2,
        player_thirst=ri(0, 42, n).to(torch.float32) / 2,
        player_fatigue=ri(-22, 62, n).to(torch.float32) / 2,
        inventory=torch.where(rb(0.5, n, 12), ri(0, 10, n, 12), ri(0, 2, n, 12)),
        zombies_position=z[0],
        zombies_health=z[1],
        zombies_mask=z[2],
        zombies_attack_cooldown=z[3],
        cows_position=c[0],
        cows_health=c[1],
        cows_mask=c[2],
        cows_attack_cooldown=c[3],
        skeletons_position=sk[0],
        skeletons_health=sk[1],
        skeletons_mask=sk[2],
        skeletons_attack_cooldown=sk[3],
        arrows_position=a[0],
        arrows_health=a[1],
        arrows_mask=a[2],
        arrows_attack_cooldown=a[3],
        arrow_directions=torch.tensor([[0, 1], [0, -1], [1, 0], [-1, 0]])[ri(0, 4, n, 3)],
        growing_plants_positions=plants,
        growing_plants_age=ri(0, 700, n, 10),
        growing_plants_mask=rb(0.5, n, 10),
        achievements=rb(0.3, n, 22),
        timestep=timestep,
        light_level=light_level(timestep, CraftaxParams()),
    )


def vmapped(fn):
    """``jax.jit(jax.vmap(fn))`` with a cache per function, for repeated test calls."""
    return jax.jit(jax.vmap(fn))
