"""Craftax-Classic's parameters and batched state.

Mirrors ``craftax/craftax_classic/envs/craftax_state.py`` (craftax 1.6.1): ``EnvParams`` and
``StaticEnvParams`` with craftax's defaults, and ``EnvState`` as a NamedTuple of ``(N, ...)``
tensors. Nested structs are flattened: ``Inventory`` is one ``(N, 12)`` tensor (columns in
:data:`~gpuvec_envs.envs.craftax.constants.INVENTORY` order) and each ``Mobs`` group is four
tensors with the group's name as prefix. Integer fields are int64 (craftax: int32, the same
values), the map is uint8.
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import torch


@dataclasses.dataclass(frozen=True)
class CraftaxParams:
    """Craftax-Classic's ``EnvParams`` and ``StaticEnvParams``, with craftax's defaults."""

    max_timesteps: int = 10000
    day_length: int = 300
    always_diamond: bool = True
    zombie_health: int = 5
    cow_health: int = 3
    skeleton_health: int = 3
    mob_despawn_distance: int = 14
    spawn_cow_chance: float = 0.1
    spawn_zombie_base_chance: float = 0.02
    spawn_zombie_night_chance: float = 0.1
    spawn_skeleton_chance: float = 0.05
    # StaticEnvParams
    map_size: tuple[int, int] = (64, 64)
    max_zombies: int = 3
    max_cows: int = 3
    max_growing_plants: int = 10
    max_skeletons: int = 2
    max_arrows: int = 3


class CraftaxState(NamedTuple):
    """One batch of Craftax-Classic states (craftax's ``EnvState``, field for field).

    ``N`` envs, an ``H x W`` map (64 x 64), ``Z/C/S/A`` zombie/cow/skeleton/arrow slots,
    ``P`` plant slots. Positions are ``(row, col)`` map cells.
    """

    map: torch.Tensor  # (N, H, W) uint8 BlockType
    mob_map: torch.Tensor  # (N, H, W) bool, a mob stands on the cell
    player_position: torch.Tensor  # (N, 2) int64 [cell]
    player_direction: torch.Tensor  # (N,) int64 Action 1-4 the player faces
    player_health: torch.Tensor  # (N,) int64, 0-9
    player_food: torch.Tensor  # (N,) int64, 0-9
    player_drink: torch.Tensor  # (N,) int64, 0-9
    player_energy: torch.Tensor  # (N,) int64, 0-9
    is_sleeping: torch.Tensor  # (N,) bool
    player_recover: torch.Tensor  # (N,) float32 accumulator
    player_hunger: torch.Tensor  # (N,) float32 accumulator
    player_thirst: torch.Tensor  # (N,) float32 accumulator
    player_fatigue: torch.Tensor  # (N,) float32 accumulator
    inventory: torch.Tensor  # (N, 12) int64 counts, INVENTORY order
    zombies_position: torch.Tensor  # (N, Z, 2) int64 [cell]
    zombies_health: torch.Tensor  # (N, Z) int64
    zombies_mask: torch.Tensor  # (N, Z) bool, slot in use
    zombies_attack_cooldown: torch.Tensor  # (N, Z) int64 [steps]
    cows_position: torch.Tensor  # (N, C, 2) int64
    cows_health: torch.Tensor  # (N, C) int64
    cows_mask: torch.Tensor  # (N, C) bool
    cows_attack_cooldown: torch.Tensor  # (N, C) int64
    skeletons_position: torch.Tensor  # (N, S, 2) int64
    skeletons_health: torch.Tensor  # (N, S) int64
    skeletons_mask: torch.Tensor  # (N, S) bool
    skeletons_attack_cooldown: torch.Tensor  # (N, S) int64
    arrows_position: torch.Tensor  # (N, A, 2) int64
    arrows_health: torch.Tensor  # (N, A) int64
    arrows_mask: torch.Tensor  # (N, A) bool
    arrows_attack_cooldown: torch.Tensor  # (N, A) int64
    arrow_directions: torch.Tensor  # (N, A, 2) int64 [cell/step]
    growing_plants_positions: torch.Tensor  # (N, P, 2) int64
    growing_plants_age: torch.Tensor  # (N, P) int64 [steps]
    growing_plants_mask: torch.Tensor  # (N, P) bool
    light_level: torch.Tensor  # (N,) float32, 0-1
    achievements: torch.Tensor  # (N, 22) bool, Achievement order
    state_rng: torch.Tensor  # (N, 2) int64 jax key words (uint32 values)
    timestep: torch.Tensor  # (N,) int64 [steps]
