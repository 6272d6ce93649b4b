"""What the five MinAtar games share: params, sticky actions, action sets, spaces.

Mirrors ``minatar/environment.py`` and ``minatar/gym.py`` (minatar 1.0.15): the agent's
action index is mapped through the action set (all 6 actions for ``-v0``, the game's minimal
set for ``-v1``); then, with probability ``sticky_action_prob``, the previous (full) action
is repeated instead. A game module subclasses :class:`MinAtarEnv` and implements the three
``game_*`` methods on full action indices ``0..5`` = ``n, l, u, r, d, f``.

Deliberate difference: ``last_action`` restarts at 0 with every episode (minatar keeps it
across resets of the same ``Environment`` object).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any, ClassVar, NamedTuple

import gymnasium as gym
import torch

from gpuvec_envs.core.constants import table
from gpuvec_envs.core.env import EnvDef
from gpuvec_envs.core.rng import Rng

#: minatar's ``action_map``: index -> meaning.
ACTIONS = ("n", "l", "u", "r", "d", "f")

# 10x10 bitboards (Space Invaders' maps, Seaquest's bullets): a map is two int64 words,
# ``lo`` = rows 0-4 and ``hi`` = rows 5-9, bit ``10 (row % 5) + col`` set where occupied.
ROW = (1 << 10) - 1  # one row of a word
WORD = (1 << 50) - 1  # five rows
COL0 = sum(1 << (10 * k) for k in range(5))  # column 0 of the five rows of a word
COL9 = COL0 << 9


#: Side of one of the 10x10 cells in a rendered frame [px].
CELL_PIXELS = 16


@functools.cache
def palette(n_channels: int) -> tuple[tuple[int, int, int], ...]:
    """The colour map of minatar: black, then ``n_channels`` colours of seaborn's "cubehelix".

    seaborn samples matplotlib's 256-entry cubehelix colormap at ``k / (n + 1)``,
    ``k = 1..n``; returned here as uint8 RGB (rounded from minatar's floats in [0, 1]).
    """
    out = [(0, 0, 0)]
    for k in range(1, n_channels + 1):
        t = min(int(k / (n_channels + 1) * 256), 255) / 255  # matplotlib's lookup table
        amp = t * (1 - t) / 2
        phi = 2 * math.pi * (0.5 / 3 - 1.5 * t)
        rgb = (
            t + amp * (p0 * math.cos(phi) + p1 * math.sin(phi))
            for p0, p1 in ((-0.14861, 1.78277), (-0.29227, -0.90649), (1.97294, 0.0))
        )
        out.append(tuple(round(255 * min(max(c, 0.0), 1.0)) for c in rgb))
    return tuple(out)


@dataclasses.dataclass(frozen=True)
class MinAtarParams:
    """Options of every MinAtar game, with minatar's defaults."""

    sticky_action_prob: float = 0.1
    difficulty_ramping: bool = True
    minimal_action_set: bool = False


class MinAtarState(NamedTuple):
    """Game state plus the previous action (for sticky actions)."""

    game: Any  # the game's own NamedTuple of (N, ...) tensors
    last_action: torch.Tensor  # (N,) int64, full action index 0..5


class MinAtarEnv(EnvDef[MinAtarState, MinAtarParams]):
    """Base of the MinAtar games; subclasses set the class constants and ``game_*`` methods."""

    params_type = MinAtarParams
    metadata = {"render_modes": ["human", "rgb_array"], "render_fps": 20}
    #: Number of observation channels C.
    n_channels: ClassVar[int]
    #: The game's minimal action set as full action indices.
    minimal_actions: ClassVar[tuple[int, ...]]

    # -- game-specific, pure and batched -------------------------------------------------
    def game_reset(self, params: MinAtarParams, rng: Rng) -> Any:
        """N fresh game states."""
        raise NotImplementedError

    def game_step(
        self, params: MinAtarParams, state: Any, action: torch.Tensor, rng: Rng
    ) -> tuple[Any, torch.Tensor, torch.Tensor]:
        """Apply full actions (N,) int64 in 0..5; returns ``(state, reward, terminal)``."""
        raise NotImplementedError

    def game_observation(self, params: MinAtarParams, state: Any) -> torch.Tensor:
        """(N, 10, 10, C) uint8 0/1 observation (bool to users), channels last as minatar."""
        raise NotImplementedError

    # -- EnvDef -----------------------------------------------------------------------------
    def observation_space(self, params: MinAtarParams, dtype: torch.dtype) -> gym.Space:
        """Box(0, 1, (10, 10, C), bool) as minatar's gym env."""
        return gym.spaces.Box(0.0, 1.0, shape=(10, 10, self.n_channels), dtype=bool)

    def action_space(self, params: MinAtarParams, dtype: torch.dtype) -> gym.Space:
        """Discrete(6), or the size of the minimal action set."""
        return gym.spaces.Discrete(len(self.action_set(params)))

    def action_set(self, params: MinAtarParams) -> tuple[int, ...]:
        """Full action index of each agent action."""
        return self.minimal_actions if params.minimal_action_set else tuple(range(len(ACTIONS)))

    def reset(
        self, params: MinAtarParams, rng: Rng, dtype: torch.dtype, options: dict[str, Any] | None
    ) -> MinAtarState:
        """Fresh games; the previous action starts at 0 (``n``)."""
        game = self.game_reset(params, rng)
        last = torch.zeros(rng.num_envs, dtype=torch.int64, device=rng.device)
        return MinAtarState(game, last)

    def step(
        self, params: MinAtarParams, state: MinAtarState, action: torch.Tensor, rng: Rng
    ) -> tuple[MinAtarState, torch.Tensor, torch.Tensor]:
        """Map the action, apply sticky actions (first draw of the step), step the game."""
        full = action
        if params.minimal_action_set:
            # A chain of selects, not a table lookup: a gather compiles to scalar CPU code.
            for i, a in enumerate(self.minimal_actions):
                if a != i:
                    full = torch.where(action == i, a, full)
        sticky = rng.bernoulli(params.sticky_action_prob)  # == uniform() < p, exactly
        full = torch.where(sticky, state.last_action, full)
        game, reward, terminal = self.game_step(params, state.game, full, rng)
        return MinAtarState(game, full), reward, terminal

    def observation(self, params: MinAtarParams, state: MinAtarState) -> torch.Tensor:
        """(N, 10, 10, C) uint8 0/1 (the shell returns it as bool)."""
        return self.game_observation(params, state.game)

    def render(self, params: MinAtarParams, state: MinAtarState) -> torch.Tensor:
        """(N, 160, 160, 3) uint8 frames: each cell in the colour of its highest set channel.

        As minatar's ``rgb_array`` (black for an empty cell, else ``palette[c + 1]`` for
        the last channel ``c`` set), each cell scaled up to ``CELL_PIXELS`` pixels.
        """
        obs = self.game_observation(params, state.game)  # (N, 10, 10, C) uint8 0/1
        dev = obs.device
        channel = torch.arange(1, self.n_channels + 1, dtype=torch.uint8, device=dev)
        index = (obs.to(torch.uint8) * channel).amax(-1)  # (N, 10, 10)
        colours = table(palette, self.n_channels, dtype=torch.uint8, like=obs)
        cells = colours[index.long()]  # (N, 10, 10, 3)
        n, rows, cols, _ = cells.shape
        k = CELL_PIXELS
        big = cells[:, :, None, :, None, :].expand(n, rows, k, cols, k, 3)
        return big.reshape(n, rows * k, cols * k, 3)
