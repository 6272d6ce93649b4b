"""The contract between an environment module and the generic vector-env shell.

An environment is a stateless :class:`EnvDef` whose methods are pure batched functions of a
frozen params dataclass and a state (a NamedTuple of tensors with a leading batch dimension
N). The shell (:mod:`gpuvec_envs.core.vector`) owns everything else: spaces batching,
device, dtype, time limits, autoreset, seeding, validation and backends.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar, Generic, TypeVar

import gymnasium as gym
import torch
from torch.utils import _pytree as pytree

from gpuvec_envs.core.rng import Rng

State = TypeVar("State", bound=tuple)
Params = TypeVar("Params")


class EnvDef(Generic[State, Params]):
    """Pure batched definition of one environment.

    Subclasses set :attr:`params_type` (a frozen dataclass of primary constants) and
    implement the five methods below. Every method must be branch-free over envs (masks and
    ``torch.where``), draw randomness only from the given :class:`Rng`, and never
    synchronise with the host, so that the shell can compile a whole step into one graph.
    """

    #: Frozen dataclass type holding the env's primary constants.
    params_type: ClassVar[type]
    #: Render modes etc., as in ``gymnasium.Env.metadata``.
    metadata: ClassVar[dict[str, Any]] = {"render_modes": []}

    def observation_space(self, params: Params, dtype: torch.dtype) -> gym.Space:
        """Space of one env's observation for a simulation dtype."""
        raise NotImplementedError

    def action_space(self, params: Params, dtype: torch.dtype) -> gym.Space:
        """Space of one env's action (``Discrete`` or ``Box``)."""
        raise NotImplementedError

    def reset(
        self, params: Params, rng: Rng, dtype: torch.dtype, options: dict[str, Any] | None
    ) -> State:
        """Sample N initial states (N = ``rng.num_envs``).

        ``options`` holds the user's reset options (``None`` inside autoreset).
        """
        raise NotImplementedError

    def step(
        self, params: Params, state: State, action: torch.Tensor, rng: Rng
    ) -> tuple[State, torch.Tensor, torch.Tensor]:
        """Advance N envs one step.

        Returns:
            ``(next_state, reward, terminated)``: reward shape (N,) in the state's float
            dtype, terminated shape (N,) bool.
        """
        raise NotImplementedError

    def observation(self, params: Params, state: State) -> torch.Tensor:
        """Observation of N envs, shape (N, *observation_space.shape)."""
        raise NotImplementedError

    def render(self, params: Params, state: State) -> torch.Tensor:
        """RGB frames (N, H, W, 3) uint8 of the given states; envs with ``rgb_array`` only."""
        raise NotImplementedError(f"{type(self).__name__} does not render")


def params_from_kwargs(params_type: type, params: Any, kwargs: dict[str, Any]) -> Any:
    """Build a params dataclass from ``params`` and/or field keyword arguments.

    Raises:
        TypeError: on a keyword that is neither a shell option nor a params field.
    """
    names = {f.name for f in dataclasses.fields(params_type)}
    unknown = sorted(set(kwargs) - names)
    if unknown:
        raise TypeError(
            f"unknown keyword argument(s) {unknown} for {params_type.__name__}; "
            f"env parameters are {sorted(names)}"
        )
    if params is None:
        return params_type(**kwargs)
    if not isinstance(params, params_type):
        raise TypeError(f"params must be a {params_type.__name__}, got {type(params).__name__}")
    return dataclasses.replace(params, **kwargs) if kwargs else params


def select(mask: torch.Tensor, if_true: Any, if_false: Any) -> Any:
    """Per-env choice between two pytrees of (N, ...) tensors; ``mask`` is bool (N,)."""

    def pick(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.where(mask.view(-1, *([1] * (a.dim() - 1))), a, b)

    return pytree.tree_map(pick, if_true, if_false)
