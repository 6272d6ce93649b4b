"""The contract between an environment module and the generic vector-env shell.

An environment is a stateless :class:`EnvDef` whose methods are pure batched functions of a
frozen params dataclass and a state (a NamedTuple of tensors with a leading batch dimension
N). The shell (:mod:`gpuvec_envs.core.vector`) owns everything else: spaces batching,
device, dtype, time limits, autoreset, seeding, validation and backends.
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Callable
from typing import Any, ClassVar, Generic, NamedTuple, TypeVar

import gymnasium as gym
import torch
from torch.utils import _pytree as pytree

from gpuvec_envs.compiler.strategies import NoFallback
from gpuvec_envs.core.rng import Rng

State = TypeVar("State", bound=tuple)
Params = TypeVar("Params")


class ObservationView(NamedTuple):
    """A structured view (e.g. a dict) of an env's one-tensor observation.

    See :meth:`EnvDef.observation_view`.
    """

    space: gym.Space  # one env's space of the view, e.g. a gymnasium.spaces.Dict
    split: Callable[[torch.Tensor], Any]  # (N, *obs_shape) tensor -> e.g. {key: (N, ...)}


class EnvDef(abc.ABC, Generic[State, Params]):
    """Pure batched definition of one environment: the contract every env implements.

    A subclass sets :attr:`params_type` and implements the five abstract methods; ``render``
    and :attr:`metadata` are optional. The shell calls ``reset``, ``step`` and
    ``observation`` inside one compiled graph per step (autoreset included), so they obey
    these rules (:func:`gpuvec_envs.check_env_def` tests each of them):

    * Branch-free over envs: per-env choices are masks and ``torch.where``, never a Python
      ``if`` on a tensor value, ``.item()``, ``bool()``, ``.tolist()`` or ``.numpy()`` (each
      a host synchronisation) nor a data-dependent shape (``nonzero``, boolean indexing).
      Python branches on ``params`` fields and dtypes are fine: they are trace-time
      constants.
    * Randomness only from the given :class:`Rng`, never ``torch.rand`` and friends, a
      ``torch.Generator``, numpy or :mod:`random`: same seed, same trajectory, and env i's
      draws do not depend on N, the device or the backend.
    * Shapes, dtypes and devices as declared: everything has leading dimension N and lives
      on ``rng.device`` (the state's device); ``step`` returns a state of exactly the
      structure, shapes and dtypes it was given, which is also what ``reset`` returns.

    The methods must not keep state on ``self``; one instance may serve many env batches.

    Example::

        class Coin(EnvDef[CoinState, CoinParams]):
            params_type = CoinParams
            ...

        env = GpuVecEnv(Coin(), num_envs=1024)
    """

    #: Frozen dataclass type holding the env's primary constants; every field has a
    #: default. Checked when an instance is created.
    params_type: ClassVar[type]
    #: As ``gymnasium.Env.metadata``; list ``"rgb_array"`` in ``"render_modes"`` only if
    #: :meth:`render` is implemented.
    metadata: ClassVar[dict[str, Any]] = {"render_modes": []}
    #: True for an env whose :meth:`reset` costs far more than a step (procedural worlds):
    #: the shell then resets, after each step, only the envs that reset (one host read of
    #: the reset mask per step) instead of building N new states inside every step and
    #: selecting; the outputs are the same bit for bit.
    costly_reset: ClassVar[bool] = False

    def __new__(cls, *args: Any, **kwargs: Any) -> EnvDef:
        """Create an instance after checking :attr:`params_type` (see :func:`check_params_type`)."""
        check_params_type(cls)
        return super().__new__(cls)

    @abc.abstractmethod
    def observation_space(self, params: Params, dtype: torch.dtype) -> gym.Space:
        """Space of one env's observation.

        Args:
            params: The env parameters.
            dtype: The simulation float dtype (``torch.float32`` or ``torch.float64``).

        Returns:
            A space whose ``shape`` and ``dtype`` are those of one row of
            :meth:`observation` (a float ``Box`` usually uses ``dtype``).
        """

    @abc.abstractmethod
    def action_space(self, params: Params, dtype: torch.dtype) -> gym.Space:
        """Space of one env's action.

        Returns:
            ``Discrete(n)`` (actions reach :meth:`step` as int64 of shape (N,)) or a
            ``Box`` of the simulation ``dtype`` (actions of shape (N, *box.shape) in
            ``dtype``).
        """

    @abc.abstractmethod
    def reset(
        self, params: Params, rng: Rng, dtype: torch.dtype, options: dict[str, Any] | None
    ) -> State:
        """Sample N initial states (N = ``rng.num_envs``, device ``rng.device``).

        Args:
            params: The env parameters.
            rng: Draws of this reset (see :class:`Rng`).
            dtype: The simulation float dtype for the state's float fields.
            options: The user's ``reset(options=...)`` minus the shell's own keys; ``None``
                inside autoreset, where the reset is traced into the step graph.

        Returns:
            A NamedTuple (possibly nested) of tensors of shape (N, ...).
        """

    @abc.abstractmethod
    def step(
        self, params: Params, state: State, action: torch.Tensor, rng: Rng
    ) -> tuple[State, torch.Tensor, torch.Tensor]:
        """Advance N envs one step.

        Args:
            params: The env parameters.
            state: The current state, as :meth:`reset` returns it.
            action: Shape (N,) int64 for ``Discrete``, (N, *shape) float for ``Box``.
            rng: Draws of this step.

        Returns:
            ``(next_state, reward, terminated)``: ``next_state`` of the same structure,
            shapes and dtypes as ``state``; ``reward`` shape (N,) of any real dtype (float
            or integer, not bool), which the shell casts to the simulation dtype;
            ``terminated`` shape (N,) bool. Truncation is the shell's time limit.
        """

    @abc.abstractmethod
    def observation(self, params: Params, state: State) -> torch.Tensor:
        """Observation of N envs.

        Returns:
            Shape (N, *observation_space.shape), of the space's dtype, every row inside the
            space. For a ``Box`` of dtype bool it may instead be uint8 0/1, which the shell
            returns to users as bool (a free view outside the compiled step: inductor before
            torch 2.13 cannot lower ``view(torch.bool)``, and a compare writes bytes one by
            one in CPU code).
        """

    def render(self, params: Params, state: State) -> torch.Tensor:
        """RGB frames of the given states, shape (N, H, W, 3) uint8; optional.

        Implemented by envs whose ``metadata["render_modes"]`` lists ``"rgb_array"``.
        """
        raise NotImplementedError(f"{type(self).__name__} does not render")

    def info(self, params: Params, state: State) -> dict[str, torch.Tensor] | None:
        """Per-env ``info`` terms of a state, e.g. reward terms; optional.

        Called on the state a step (or reset) returns: ``step()`` and ``reset()`` return
        these terms in ``info``, and in ``SAME_STEP`` mode ``info["final_info"]`` holds
        the terms of the pre-reset states (with ``_<key>`` masks of the envs that ended).
        Terms that depend on the step's action or on the state before it (a velocity, a
        control cost) are stored in the state by :meth:`step`. Pure and branch-free like
        :meth:`step`.

        Returns:
            ``{name: (N, ...) tensor}``, the same keys, shapes and dtypes for every state;
            ``None`` (default): no terms.
        """
        return None

    def episode_info(self, params: Params, state: State) -> dict[str, torch.Tensor] | None:
        """Per-env values for ``info`` at an episode's end; optional.

        Computed inside the step from the state before the autoreset; ``step()`` puts each
        ``(N, ...)`` tensor in ``info[name]`` with the mask ``info["_" + name]`` (bool
        ``(N,)``: the episode ended at this step). ``None`` (default): nothing.
        """
        return None

    def observation_view(self, params: Params) -> ObservationView | None:
        """A structured view of :meth:`observation` for users; optional.

        The shell steps, validates, checkpoints and returns ``final_obs`` as one tensor.
        An env whose users expect a structured observation (a ``Dict`` space) packs it
        into that tensor and returns here how to split it: ``gymnasium.make_vec`` then
        wraps the shell in :class:`~gpuvec_envs.core.wrapper.StructuredObservation` and
        ``gymnasium.make``'s single env returns the split row. ``None`` (default): the
        observation is the tensor.
        """
        return None


def check_params_type(cls: type) -> None:
    """Check that an :class:`EnvDef` class declares a usable ``params_type``.

    Raises:
        TypeError: if ``params_type`` is missing, not a frozen dataclass, or has a field
            without a default (the shell builds ``params_type()`` from keywords alone).
    """
    name = cls.__name__
    ptype = getattr(cls, "params_type", None)
    if ptype is None:
        raise TypeError(f"{name}.params_type is not set; set it to a frozen dataclass type")
    if not (isinstance(ptype, type) and dataclasses.is_dataclass(ptype)):
        raise TypeError(f"{name}.params_type must be a dataclass type, got {ptype!r}")
    if not ptype.__dataclass_params__.frozen:
        raise TypeError(
            f"{name}.params_type {ptype.__name__} must be frozen: "
            "@dataclasses.dataclass(frozen=True)"
        )
    missing = dataclasses.MISSING
    no_default = [
        f.name
        for f in dataclasses.fields(ptype)
        if f.default is missing and f.default_factory is missing
    ]
    if no_default:
        raise TypeError(f"{name}.params_type {ptype.__name__} fields need defaults: {no_default}")


def step_output_problems(
    what: str, t: Any, n: int, device: torch.device
) -> list[tuple[type[Exception], str]]:
    """Broken rules of a ``step`` output ``what`` (``"reward"`` or ``"terminated"``).

    ``reward`` must be (N,) of a real dtype (float or integer, not bool or complex),
    ``terminated`` (N,) bool, both on ``device``. Reads only metadata (no host sync), so it
    also runs while a step is traced.

    Returns:
        ``(exception type, message)`` per broken rule; empty if none.
    """
    if not isinstance(t, torch.Tensor):
        return [(TypeError, f"{what} must be a tensor, got {type(t).__name__}")]
    problems: list[tuple[type[Exception], str]] = []
    if tuple(t.shape) != (n,) or t.device != device:
        got = f"{tuple(t.shape)} {t.dtype} on {t.device}"
        problems.append((ValueError, f"{what} must have shape ({n},) on {device}, got {got}"))
    if what == "terminated" and t.dtype != torch.bool:
        msg = f"terminated must be bool, got {t.dtype} (compare, e.g. `x != 0`)"
        problems.append((TypeError, msg))
    if what == "reward" and (t.dtype == torch.bool or t.is_complex()):
        msg = (
            f"reward must be a real float or integer dtype, got {t.dtype} "
            "(use torch.where(flag, 1.0, 0.0))"
        )
        problems.append((TypeError, msg))
    return problems


class ContractTypeError(TypeError, NoFallback):
    """A method's output of the wrong type or dtype (the compiler does not fall back)."""


class ContractValueError(ValueError, NoFallback):
    """A method's output of the wrong shape or device (the compiler does not fall back)."""


def check_step_outputs(
    env_def: EnvDef, reward: Any, terminated: Any, n: int, device: torch.device
) -> None:
    """Raise if ``step``'s reward or terminated breaks :func:`step_output_problems`' rules.

    Raises:
        ContractTypeError: a non-tensor or a wrong dtype (e.g. a bool reward).
        ContractValueError: a wrong shape or device.
    """
    problems = step_output_problems("reward", reward, n, device)
    problems += step_output_problems("terminated", terminated, n, device)
    if problems:
        typed = any(k is TypeError for k, _ in problems)
        kind = ContractTypeError if typed else ContractValueError
        rules = "; ".join(m for _, m in problems)
        raise kind(f"{type(env_def).__name__}.step breaks the EnvDef contract: {rules}")


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
        return torch.where(mask if a.dim() == 1 else mask.view(-1, *([1] * (a.dim() - 1))), a, b)

    kind = type(if_true)
    # A flat NamedTuple state without pytree's per-node work; dynamo (which traces pytree
    # natively and, before torch 2.13, rejects ``hasattr`` on a class) takes the tree_map.
    if not torch.compiler.is_compiling() and kind is type(if_false) and hasattr(kind, "_fields"):
        if all(isinstance(x, torch.Tensor) for x in (*if_true, *if_false)):
            return kind(*map(pick, if_true, if_false))
    return pytree.tree_map(pick, if_true, if_false)
