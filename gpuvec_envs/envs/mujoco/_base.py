"""What gymnasium's MuJoCo v5 tasks share: params, state, reset noise, numpy's sums.

Mirrors ``gymnasium/envs/mujoco/mujoco_env.py`` (gymnasium 1.4, ``MujocoEnv``): the model
from gymnasium's assets (or the user's ``xml_file``), ``frame_skip`` physics steps per env
step with ``mj_rnePostConstraint`` after them, ``dt = timestep * frame_skip``, the action
space from ``actuator_ctrlrange`` (float32 bounds), and a reset that is ``mj_resetData``,
the task's ``qpos``/``qvel`` and ``mj_forward``. The state rows are float64: MuJoCo's C
engine on the CPU computes in float64 (bitwise gymnasium's), MuJoCo Warp (CUDA, or
``engine="warp"``) in float32, its results widened to the rows' float64. Observations and
rewards are cast to the simulation dtype (float32 by default, float64 gives gymnasium's
numbers on the C engine).

Reset noise comes from the shell's counter-based :class:`~gpuvec_envs.core.rng.Rng`, with
gymnasium's distributions and scales (uniform draws carry 24 random bits; normal draws are
Box-Muller of two of them), so a trajectory depends on the seed only, not on N.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, ClassVar, NamedTuple

import gymnasium as gym
import numpy as np
import torch

from gpuvec_envs.core.constants import table
from gpuvec_envs.core.eager import host_any
from gpuvec_envs.core.env import EnvDef
from gpuvec_envs.core.rng import Rng
from gpuvec_envs.envs.mujoco import bridge


# -- params ------------------------------------------------------------------------------
def _real(name: str, value: Any, finite: bool = True) -> float:
    ok = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(
        value, (bool, np.bool_)
    )
    if not ok or math.isnan(value) or (finite and math.isinf(value)):
        kind = "a finite real number" if finite else "a real number"
        raise ValueError(f"{name} must be {kind}, got {value!r}")
    return float(value)


def _check_field(name: str, value: Any, annotation: str) -> Any:
    """``value`` checked against its field's annotation and normalised (hashable)."""
    if annotation == "float":
        return _real(name, value)
    if annotation == "bool":
        if not isinstance(value, (bool, np.bool_)):
            raise ValueError(f"{name} must be a bool, got {value!r}")
        return bool(value)
    if annotation == "int":
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
            raise ValueError(f"{name} must be an int, got {value!r}")
        return int(value)
    if annotation == "str":
        if not isinstance(value, str):
            raise ValueError(f"{name} must be a str, got {value!r}")
        return value
    if annotation == "int | str":
        if isinstance(value, str):
            return value
        return _check_field(name, value, "int")
    if annotation == "tuple[float, float]":
        if isinstance(value, (str, bytes)) or not hasattr(value, "__len__") or len(value) != 2:
            raise ValueError(f"{name} must be a pair (low, high), got {value!r}")
        low, high = (_real(name, v, finite=False) for v in value)
        if not low <= high:
            raise ValueError(f"{name} must have low <= high, got {value!r}")
        return (low, high)
    raise TypeError(f"no check for {name}: {annotation}")  # a field added without one


@dataclasses.dataclass(frozen=True)
class MujocoParams:
    """Keyword arguments every v5 task takes (gymnasium's ``MujocoEnv`` ones).

    Values are checked when the params are made (``ValueError`` naming the field).
    """

    xml_file: str = ""  # gymnasium asset name or a path starting with ".", "/" or "~"
    frame_skip: int = 1  # MuJoCo steps per env step
    engine: str = "auto"  # "auto" (C on the CPU, MuJoCo Warp on CUDA), "c" or "warp"
    solver: str = "model"  # the XML's constraint solver, or "newton", "cg", "pgs"
    width: int = 480  # [px] rendered frames
    height: int = 480  # [px]

    def __post_init__(self) -> None:
        """Check and normalise every field (``ValueError`` on a bad value)."""
        for f in dataclasses.fields(self):
            value = _check_field(f.name, getattr(self, f.name), str(f.type))
            object.__setattr__(self, f.name, value)
        for name in ("frame_skip", "width", "height"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be a positive int, got {getattr(self, name)}")
        if self.engine not in ("auto", "c", "warp"):
            raise ValueError(f"engine must be 'auto', 'c' or 'warp', got {self.engine!r}")
        if self.solver not in bridge.SOLVERS:
            raise ValueError(f"solver must be one of {bridge.SOLVERS}, got {self.solver!r}")
        scale = getattr(self, "reset_noise_scale", 0.0)
        if scale < 0:
            raise ValueError(f"reset_noise_scale must be >= 0, got {scale}")


# -- state and a view of it --------------------------------------------------------------
class MujocoState(NamedTuple):
    """N simulations of one task."""

    physics: torch.Tensor  # (N, K) float64: [time s, qpos, qvel, act, qacc_warmstart]
    derived: torch.Tensor  # (N, D) float64: the task's mjData fields after the last step
    stale: torch.Tensor  # (N,) bool: just reset, ``derived`` not computed yet
    terms: torch.Tensor  # (N, T) sim dtype: the last step's info terms (0 after a reset)
    warned: torch.Tensor  # (N,) bool: MuJoCo reset this env's data in its last step


class Sim:
    """Read access to N simulations: state rows and the task's derived fields, as views.

    Args:
        model: The model's constants.
        fields: Names of the derived fields, in the order of ``derived``'s columns.
        physics: (N, K) float64 state rows.
        derived: (N, D) float64 derived fields.
    """

    def __init__(
        self,
        model: bridge.ModelInfo,
        fields: tuple[str, ...],
        physics: torch.Tensor,
        derived: torch.Tensor,
    ) -> None:
        self.model, self.physics, self.derived = model, physics, derived
        self._slices: dict[str, tuple[int, int, tuple[int, ...]]] = {}
        start = 0
        for f in fields:
            shape = model.field_shapes[f]
            size = int(np.prod(shape))
            self._slices[f] = (start, start + size, shape)
            start += size

    @property
    def qpos(self) -> torch.Tensor:
        """(N, nq) joint positions."""
        return self.physics[:, 1 : 1 + self.model.nq]

    @property
    def qvel(self) -> torch.Tensor:
        """(N, nv) joint velocities."""
        nq = self.model.nq
        return self.physics[:, 1 + nq : 1 + nq + self.model.nv]

    def field(self, name: str) -> torch.Tensor:
        """(N, *shape) float64 mjData field ``name`` (one of the task's fields)."""
        start, stop, shape = self._slices[name]
        return self.derived[:, start:stop].reshape(-1, *shape)

    def body_xpos(self, body: int) -> torch.Tensor:
        """(N, 3) [m] position of body ``body`` (gymnasium's ``get_body_com``)."""
        return self.field("xpos")[:, body]


# -- numpy-exact arithmetic --------------------------------------------------------------
def np_sum(x: torch.Tensor) -> torch.Tensor:
    """(N, n) -> (N,) sums in numpy's pairwise order (``np.sum`` of each row, bitwise).

    numpy adds fewer than 8 numbers one by one from 0, up to 128 in eight interleaved
    partial sums, and splits longer runs in two (``pairwise_sum`` in its ``loops_utils``).
    """
    n = x.shape[-1]
    if n < 8:
        res = torch.zeros_like(x[..., 0])
        for i in range(n):
            res = res + x[..., i]
        return res
    if n <= 128:
        r = x[..., 0:8]
        i = 8
        while i < n - n % 8:
            r = r + x[..., i : i + 8]
            i += 8
        c = r.unbind(-1)
        res = ((c[0] + c[1]) + (c[2] + c[3])) + ((c[4] + c[5]) + (c[6] + c[7]))
        for j in range(i, n):
            res = res + x[..., j]
        return res
    n2 = n // 2
    n2 -= n2 % 8
    return np_sum(x[..., :n2]) + np_sum(x[..., n2:])


@torch.library.custom_op("gpuvec::mujoco_np_norm", mutates_args=())
def np_norm(x: torch.Tensor) -> torch.Tensor:
    """(N, n) -> (N,) Euclidean norms, as ``np.linalg.norm`` of each row.

    ``torch.linalg.vector_norm`` agrees bitwise with numpy's (BLAS ``ddot``, then ``sqrt``)
    for the 2- and 3-vectors the tasks use (checked on 20 000 random vectors each). An
    opaque op, so that a compiled step calls the same kernel (inductor's own reduction and
    square root give other last bits).
    """
    return torch.linalg.vector_norm(x, dim=-1)


@np_norm.register_fake
def _np_norm_fake(x: torch.Tensor) -> torch.Tensor:
    return x.new_empty(x.shape[:-1])


def square_sum(x: torch.Tensor) -> torch.Tensor:
    """(N, ...) -> (N,) ``np.sum(np.square(x))`` of each env's values, numpy's order."""
    return np_sum((x * x).reshape(x.shape[0], -1))


# -- reset noise -------------------------------------------------------------------------
def uniform(rng: Rng, n: int, low: float, high: float) -> torch.Tensor:
    """(N, n) float64 uniform in ``[low, high)``, as ``np_random.uniform(low, high, n)``."""
    return low + (high - low) * rng.uniform(n, dtype=torch.float64)


def standard_normal(rng: Rng, n: int) -> torch.Tensor:
    """(N, n) float64 standard normal draws (Box-Muller of two 24-bit uniforms)."""
    u = rng.uniform(2, n, dtype=torch.float64)
    radius = torch.sqrt(-2.0 * torch.log1p(-u[:, 0]))  # 1 - u in (0, 1]
    return radius * torch.cos((2.0 * math.pi) * u[:, 1])


def first_accepted(candidates: torch.Tensor, ok: torch.Tensor) -> torch.Tensor:
    """Rejection sampling without a loop: each env's first accepted candidate.

    Args:
        candidates: (N, k, d) draws.
        ok: (N, k) bool, which are accepted.

    Returns:
        (N, d): the first accepted candidate (the last one if none is; with the tasks'
        acceptance rates and ``k = 32`` that is below 1e-13 per reset).
    """
    k = ok.shape[1]
    index = torch.where(ok, torch.arange(k, device=ok.device), k - 1).amin(dim=1)
    return candidates.gather(1, index.view(-1, 1, 1).expand(-1, 1, candidates.shape[2]))[:, 0]


# -- the env ---------------------------------------------------------------------------
def constant(values: np.ndarray, like: torch.Tensor) -> torch.Tensor:
    """A float64 constant tensor of ``values`` on ``like``'s device (built once per device)."""
    return table(tuple(np.asarray(values, np.float64).tolist()), dtype=torch.float64, like=like)


def reset_noise(
    model: bridge.ModelInfo, rng: Rng, scale: float, qvel_normal: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    """The common ``reset_model`` of gymnasium's tasks.

    ``init_qpos + U(-scale, scale)`` and ``init_qvel + scale * N(0, 1)`` (``qvel_normal``)
    or ``init_qvel + U(-scale, scale)``.

    Returns:
        (N, nq) qpos and (N, nv) qvel, float64.
    """
    noise = uniform(rng, model.nq, -scale, scale)
    qpos = constant(model.qpos0, noise) + noise
    if qvel_normal:
        qvel = 0.0 + scale * standard_normal(rng, model.nv)
    else:
        qvel = 0.0 + uniform(rng, model.nv, -scale, scale)
    return qpos, qvel


def numpy_dtype(dtype: torch.dtype) -> type[np.floating]:
    """The numpy float type of a torch float dtype."""
    return np.float64 if dtype == torch.float64 else np.float32


class MujocoEnv(EnvDef[MujocoState, MujocoParams]):
    """Shared body of the v5 tasks; a task implements the hooks below.

    Hooks: :meth:`fields` (derived mjData fields it reads), :meth:`obs_size`,
    :meth:`reset_model` (``qpos``, ``qvel``), :meth:`transition` (reward, termination and
    info terms of a step), :meth:`get_obs` and optionally :meth:`state_info` (info terms
    of a state, e.g. ``x_position``). :attr:`terms` names what :meth:`transition` stores.
    """

    params_type = MujocoParams
    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["rgb_array"]}
    #: gymnasium's ``DEFAULT_CAMERA_CONFIG`` of the task (``MjvCamera`` attribute, value).
    camera: ClassVar[tuple[tuple[str, Any], ...]] = ()
    #: Names of the info terms :meth:`transition` returns, stored in the state.
    terms: ClassVar[tuple[str, ...]] = ()
    #: :meth:`transition` reads derived fields of the pre-step state.
    reads_before: ClassVar[bool] = False

    # -- hooks ---------------------------------------------------------------------------
    def fields(self, params: Any) -> tuple[str, ...]:
        """The ``mjData`` fields the task reads (see :data:`bridge.FIELDS`)."""
        return ()

    def obs_size(self, params: Any, model: bridge.ModelInfo) -> int:
        """Length of one observation."""
        raise NotImplementedError

    def reset_model(
        self, params: Any, model: bridge.ModelInfo, rng: Rng
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(N, nq) qpos and (N, nv) qvel float64 of a reset (gymnasium's ``reset_model``)."""
        raise NotImplementedError

    def transition(
        self, params: Any, before: Sim, after: Sim, action: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
        """``(reward (N,) float64, terminated (N,) bool, {term: (N,)})`` of a step.

        ``action`` is (N, nu) float64, as written to ``data.ctrl``.
        """
        raise NotImplementedError

    def get_obs(self, params: Any, sim: Sim) -> torch.Tensor:
        """(N, obs_size) float64 observation (gymnasium's ``_get_obs``)."""
        raise NotImplementedError

    def state_info(self, params: Any, sim: Sim) -> dict[str, torch.Tensor]:
        """Info terms that are functions of the state (gymnasium's reset info)."""
        return {}

    # -- shared machinery ----------------------------------------------------------------
    def model(self, params: Any) -> bridge.ModelInfo:
        """The task's model constants (loads the XML once)."""
        return bridge.model_info(bridge.asset_path(params.xml_file))

    def rne_post(self, params: Any) -> bool:
        """Whether the task reads fields ``mj_rnePostConstraint`` computes."""
        return any(f in ("cfrc_ext", "cfrc_int", "cacc") for f in self.fields(params))

    def engine(self, params: Any, device: torch.device) -> bridge.Engine:
        """The engine stepping this task on ``device``."""
        path = bridge.asset_path(params.xml_file)
        fields, rne = self.fields(params), self.rne_post(params)
        return bridge.engine(path, fields, rne, device, params.engine, params.solver)

    def dt(self, params: Any) -> float:
        """[s] time of one env step, ``timestep * frame_skip`` (gymnasium's ``dt``)."""
        return self.model(params).timestep * params.frame_skip

    def observation_space(self, params: Any, dtype: torch.dtype) -> gym.Space:
        """Unbounded Box of :meth:`obs_size`, in ``dtype`` (gymnasium's is float64)."""
        size = self.obs_size(params, self.model(params))
        return gym.spaces.Box(-np.inf, np.inf, shape=(size,), dtype=numpy_dtype(dtype))

    def action_space(self, params: Any, dtype: torch.dtype) -> gym.Space:
        """Box of ``actuator_ctrlrange`` (bounds rounded to float32 as gymnasium's)."""
        low, high = self.model(params).ctrlrange.astype(np.float32).T
        nd = numpy_dtype(dtype)
        return gym.spaces.Box(low.astype(nd), high.astype(nd), dtype=nd)

    def reset(
        self, params: Any, rng: Rng, dtype: torch.dtype, options: dict[str, Any] | None
    ) -> MujocoState:
        """``mj_resetData`` then the task's ``qpos``/``qvel``; the forward pass is deferred.

        The derived fields of a reset state come from ``mj_forward`` at its first use
        (``stale``), so a reset traced into every step runs no physics.
        """
        model = self.model(params)
        qpos, qvel = self.reset_model(params, model, rng)
        self.engine(params, qpos.device)  # built here, by the eager first reset, not in a trace
        n = qpos.shape[0]
        zeros = qpos.new_zeros
        physics = torch.cat([zeros(n, 1), qpos, qvel, zeros(n, model.na + model.nv)], dim=1)
        size = sum(int(np.prod(model.field_shapes[f])) for f in self.fields(params))
        return MujocoState(
            physics,
            zeros(n, size),
            torch.ones(n, dtype=torch.bool, device=qpos.device),
            torch.zeros(n, len(self.terms), dtype=dtype, device=qpos.device),
            torch.zeros(n, dtype=torch.bool, device=qpos.device),
        )

    def current(self, params: Any, state: MujocoState) -> Sim:
        """A :class:`Sim` of ``state`` with the derived fields of just-reset envs computed."""
        derived = state.derived
        if self.fields(params) and host_any(state.stale) is not False:
            fresh = self.engine(params, state.physics.device).forward(state.physics, state.stale)
            derived = torch.where(state.stale[:, None], fresh.to(derived.dtype), derived)
        return Sim(self.model(params), self.fields(params), state.physics, derived)

    def step(
        self, params: Any, state: MujocoState, action: torch.Tensor, rng: Rng
    ) -> tuple[MujocoState, torch.Tensor, torch.Tensor]:
        """``frame_skip`` MuJoCo steps with ``ctrl = action``, then the task's reward."""
        model, fields = self.model(params), self.fields(params)
        if self.reads_before:
            before = self.current(params, state)
        else:
            before = Sim(model, fields, state.physics, state.derived)
        ctrl = action.to(torch.float64)
        eng = self.engine(params, state.physics.device)
        physics, derived, warned = eng.step(state.physics, ctrl, params.frame_skip)
        # the state keeps its float64 rows on every engine (MuJoCo Warp returns float32)
        physics, derived = physics.to(state.physics.dtype), derived.to(state.derived.dtype)
        after = Sim(model, fields, physics, derived)
        reward, terminated, terms = self.transition(params, before, after, ctrl)
        stored = state.terms
        if self.terms:
            stored = torch.stack([terms[k] for k in self.terms], dim=1).to(stored.dtype)
        new = MujocoState(physics, derived, torch.zeros_like(state.stale), stored, warned)
        return new, reward, terminated

    def observation(self, params: Any, state: MujocoState) -> torch.Tensor:
        """(N, obs_size) observation in the simulation dtype."""
        return self.get_obs(params, self.current(params, state)).to(state.terms.dtype)

    def info(self, params: Any, state: MujocoState) -> dict[str, torch.Tensor]:
        """Info terms of the state, each (N,) or (N, k).

        The step's reward terms and velocities (0 after a reset), the state's terms
        (positions), and ``mujoco_warning`` (N,) bool: MuJoCo reset that env's data for a
        bad qpos, qvel, qacc or ctrl in its last step, as ``mj_step`` does.
        """
        dtype = state.terms.dtype
        out = {k: state.terms[:, i] for i, k in enumerate(self.terms)}
        sim = Sim(self.model(params), self.fields(params), state.physics, state.derived)
        if self.needs_derived_info:
            sim = self.current(params, state)
        out.update({k: v.to(dtype) for k, v in self.state_info(params, sim).items()})
        out["mujoco_warning"] = state.warned
        return out

    #: :meth:`state_info` reads derived fields (computed for just-reset envs first).
    needs_derived_info: ClassVar[bool] = False

    def render(self, params: Any, state: MujocoState) -> torch.Tensor:
        """(N, height, width, 3) uint8 frames, as gymnasium's ``rgb_array`` (needs OpenGL).

        gymnasium fixes its free camera's look-at point at the first frame; here each
        frame looks at its own state's geoms (the same for a frame of the first state).
        """
        path = bridge.asset_path(params.xml_file)
        frames = bridge.render(path, state.physics, params.width, params.height, self.camera)
        return frames.to(state.physics.device)
