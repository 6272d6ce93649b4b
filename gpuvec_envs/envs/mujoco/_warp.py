"""MuJoCo Warp engine: batched MuJoCo physics on Warp arrays exchanged with torch zero-copy.

The engine behind the MuJoCo family's ``Engine`` interface on MuJoCo Warp (``mujoco_warp``,
float32, CUDA or Warp's CPU device). Each env's physics lives in a torch row

    [time (1), qpos (nq), qvel (nv), act (na), qacc_warmstart (nv)]     # float32, SI units

and one :meth:`WarpEngine.step` is gymnasium's ``MujocoEnv.do_simulation``: set ``ctrl``,
``mj_step`` ``nstep`` times, then (``rne_post``) ``mj_rnePostConstraint``; the derived
``fields`` (``xpos``, ``cfrc_ext``, ...) are read after that, as MuJoCo C leaves them.

Every Warp call of the family sits in this module (the seam). Rows, controls and derived
fields move between torch and Warp through torch views of the Warp arrays (``wp.to_torch``)
on torch's current CUDA stream: no host round trip and no host sync. The Warp part of a step
(``nstep`` substeps and the post-constraint pass) replays one Warp graph per ``(N, nstep)``
(a CUDA graph; on the CPU Warp's recorded replay). On CUDA that matters: MuJoCo Warp's
solver loop is a conditional graph node, which outside a graph reads its condition back to
the host once per solver iteration. ``graph=False`` switches the Warp graph off (eager Warp
launches; on CUDA a host sync per solver iteration).

A torch CUDA graph around the engine is not safe: building a conditional node, Warp ends the
stream capture and restarts it into the same graph, which gives the capture a new id, and
torch's graph memory pool recognises its capture by that id, so tensors allocated after the
engine call in the same capture would not come from the graph's pool. The engine's custom ops
are therefore tagged ``cudagraph_unsafe``: ``torch.compile``'s CUDA graphs (graph partition,
on by default since torch 2.8) capture the torch code before and after the step and run the
step between the replays, where it replays its own Warp graph (one launch). A step inside a
capture raises, unless ``external_capture=True`` (experimental: the engine registers the
capture with Warp, ``wp.capture_begin(external=True)``, and launches into it;
tools/gpu_mujoco_check.py checks replays against eager steps).

Not a copy of MuJoCo C: MuJoCo Warp computes in float32, so a step agrees with ``mj_step``
to a tolerance, not bitwise (tests/mujoco_warp_common.py states it), and its plane-capsule
contacts of steep capsules take another friction frame than MuJoCo C's (Ant differs there).
Models with features MuJoCo Warp lacks raise ``NotImplementedError`` naming them
(gymnasium's Humanoid and HumanoidStandup use the PGS solver, which MuJoCo Warp does not
have; ``solver=`` selects another, which changes the physics). docs/mujoco.md has the
measured differences.
"""

from __future__ import annotations

import contextlib
import copy
import gc
import itertools
import weakref
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

import mujoco
import torch

MAXVAL = 1e10
"""MuJoCo's ``mjMAXVAL``: |qpos|, |qvel| or |qacc| above it is a bad state (``mj_checkPos``)."""

_RNE_POST_FIELDS = ("cacc", "cfrc_int", "cfrc_ext")
"""Fields only ``mj_rnePostConstraint`` writes; ``mj_resetData`` + ``mj_forward`` leaves them 0."""

_SOLVERS = {"newton": mujoco.mjtSolver.mjSOL_NEWTON, "cg": mujoco.mjtSolver.mjSOL_CG}


@contextlib.contextmanager
def _no_gc() -> Iterator[None]:
    """Keeps the garbage collector off during a capture.

    A Warp object finalised mid-capture would record its free into the graph (mjlab's
    ``sim.py`` does the same for the same reason).
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def default_njmax(model: mujoco.MjModel, nconmax: int) -> int:
    """Constraint rows per world for a model, an upper estimate.

    Room for every limit, equality and friction-loss row plus ``min(nconmax, 2 * ngeom)``
    contacts of the model's largest condim.
    MuJoCo Warp's own default (64 rows for gymnasium's models) overflows on HumanoidStandup
    lying on the floor (MuJoCo C reaches 60 rows there in random rollouts).
    """
    condim = int(model.geom_condim.max()) if model.ngeom else 1
    pyramidal = model.opt.cone == mujoco.mjtCone.mjCONE_PYRAMIDAL
    per_contact = 1 if condim == 1 else 2 * (condim - 1) if pyramidal else condim
    fixed = int(model.jnt_limited.sum()) + int(model.tendon_limited.sum())
    fixed += 6 * model.neq + int((model.dof_frictionloss > 0).sum())
    return fixed + per_contact * min(nconmax, 2 * model.ngeom)


def _buffer_sizes(model: mujoco.MjModel, nconmax: int | None, njmax: int | None) -> tuple[int, int]:
    """Contacts and constraint rows per world.

    As given, else MuJoCo Warp's default heuristics (private functions of
    ``mujoco_warp._src.io``; 48 and 64, their values for gymnasium's models, where absent),
    the rows raised to :func:`default_njmax`.
    """
    try:
        from mujoco_warp._src import io as mjw_io

        default_ncon, default_nj = mjw_io._default_nconmax(model), mjw_io._default_njmax(model)
    except (ImportError, AttributeError):  # a MuJoCo Warp without them
        default_ncon, default_nj = 48, 64
    nconmax = default_ncon if nconmax is None else int(nconmax)
    if njmax is None:
        njmax = max(default_nj, default_njmax(model, nconmax))
    return nconmax, int(njmax)


def _import_warp() -> tuple[Any, Any]:
    """Imports warp and mujoco_warp (late: ``import gpuvec_envs`` must not load Warp)."""
    import mujoco_warp as mjw
    import warp as wp

    wp.init()
    return wp, mjw


@dataclass
class _World:
    """MuJoCo Warp Data for one batch size and torch views of its arrays.

    Attributes:
        n: number of worlds (envs).
        data: the ``mujoco_warp.Data`` of ``n`` worlds.
        views: torch tensors aliasing ``data``'s arrays, by field name, shape (n, ...).
        graphs: captured Warp graphs of the step by ``nstep``, and of ``forward`` (key 0).
        keep: Warp graphs of torch-initiated captures, kept alive with their allocations.
    """

    n: int
    data: Any
    views: dict[str, torch.Tensor]
    graphs: dict[int, Any] = field(default_factory=dict)
    keep: list[Any] = field(default_factory=list)


class WarpEngine:
    """MuJoCo physics on MuJoCo Warp, one per (model, device), for any batch size N.

    Args:
        model: the compiled MuJoCo model (not modified; copied when ``solver`` changes it).
        fields: MjData field names flattened into ``derived`` in this order, e.g.
            ``("xpos", "cfrc_ext")``; any array of ``mujoco_warp.Data`` with a leading world
            dimension (``xpos``, ``xipos``, ``site_xpos``, ``cinert``, ``cvel``, ``cfrc_ext``,
            ``qfrc_actuator``, ``sensordata``, ...).
        rne_post: run ``mj_rnePostConstraint`` after the substeps (needed for ``cfrc_ext``,
            ``cfrc_int``, ``cacc``).
        device: torch device of the rows (``"cpu"`` runs on Warp's CPU device, single threaded).
        solver: replace the model's constraint solver (``"newton"`` or ``"cg"``); needed for
            models using PGS, which MuJoCo Warp lacks. Changes the physics: such an engine
            does not match MuJoCo C on the original model.
        graph: replay the Warp part of a step as one captured Warp graph (default on); off,
            the Warp kernels launch eagerly (on CUDA with host syncs in the solver loop).
        deterministic: MuJoCo Warp's deterministic mode (stable contact order, canonical
            constraint rows, order-invariant atomic sums), so that on a GPU an env's result
            does not depend on N or on the other envs; off is faster on CUDA.
        external_capture: inside a torch CUDA graph capture, launch the Warp kernels into it
            (experimental, see the module docstring); off, a step there raises.
        nconmax: contacts allocated per world (MuJoCo Warp's default if None).
        njmax: constraint rows allocated per world (if None, the larger of MuJoCo Warp's
            default and :func:`default_njmax`). Overflowing worlds are ``warned``.
        handle: this engine's key in the custom ops' registry; give one that is the same in
            every process where a compiled step may be built (the MuJoCo family hashes its
            engine key); default: a fresh number of this process.

    Raises:
        NotImplementedError: the model uses a feature MuJoCo Warp does not support.
        ValueError: a field name that ``mujoco_warp.Data`` lacks, or a bad ``solver``.
    """

    def __init__(
        self,
        model: mujoco.MjModel,
        fields: tuple[str, ...],
        rne_post: bool,
        device: torch.device | str,
        *,
        solver: Literal["newton", "cg"] | None = None,
        graph: bool = True,
        deterministic: bool = True,
        external_capture: bool = False,
        nconmax: int | None = None,
        njmax: int | None = None,
        handle: int | None = None,
    ) -> None:
        self.device = torch.device(device)
        if self.device.type == "cuda" and self.device.index is None:
            self.device = torch.device("cuda", torch.cuda.current_device())
        if self.device.type not in ("cpu", "cuda"):
            raise ValueError(f"WarpEngine runs on 'cpu' or 'cuda' devices, got {self.device}")
        if solver is not None:
            if solver not in _SOLVERS:
                raise ValueError(f"solver must be one of {sorted(_SOLVERS)}, got {solver!r}")
            model = copy.deepcopy(model)
            model.opt.solver = _SOLVERS[solver]
        elif model.opt.solver == mujoco.mjtSolver.mjSOL_PGS:
            raise NotImplementedError(
                "MuJoCo Warp has no PGS solver, which this model uses (gymnasium's Humanoid and "
                "HumanoidStandup do); pass solver='newton' or 'cg' to run it with another "
                "solver (different physics from MuJoCo C)"
            )
        self.mj_model = model
        wp, mjw = _import_warp()
        self._wp, self._mjw = wp, mjw
        self._wp_device = wp.get_device(str(self.device))
        self.fields = tuple(fields)
        self.rne_post = bool(rne_post)
        self.graph = bool(graph)
        self.nconmax, self.njmax = _buffer_sizes(model, nconmax, njmax)
        self.nq, self.nv, self.nu, self.na = model.nq, model.nv, model.nu, model.na
        self.row_size = 1 + self.nq + 2 * self.nv + self.na
        with wp.ScopedDevice(self._wp_device):
            self.wp_model = mjw.put_model(model)  # NotImplementedError for unsupported features
        self.deterministic = bool(deterministic)
        self.external_capture = bool(external_capture)
        if self.deterministic:
            self.wp_model.opt.deterministic = int(mjw.DeterminismType.ALL)
        self._worlds: dict[int, _World] = {}
        self._streams: dict[int, Any] = {}
        self.handle = next(_HANDLES) if handle is None else int(handle)
        """This engine's key in the custom ops' registry (valid in this process)."""
        _BY_HANDLE[self.handle] = self
        probe = self._world(1)
        self.field_sizes = tuple(probe.views[f][0].numel() for f in self.fields)
        self.derived_size = sum(self.field_sizes)
        data0 = mujoco.MjData(model)
        self.reset_row = torch.zeros(self.row_size, dtype=torch.float32)
        """(K,) float32 CPU: the row ``mj_resetData`` leaves (time 0, qpos0, all else 0)."""
        self.reset_row[1 : 1 + self.nq] = torch.as_tensor(data0.qpos, dtype=torch.float32)
        self._reset_row = self.reset_row.to(self.device)
        self.reset_derived = self.run_forward(self._reset_row[None])[0]
        """(D,) float32 on the device: ``fields`` after ``mj_resetData`` + ``mj_forward``."""

    # ----------------------------------------------------------------- the interface

    def step(
        self, rows: torch.Tensor, ctrl: torch.Tensor, nstep: int
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """:meth:`run_step` as the custom op ``gpuvec::mujoco_warp_step`` (opaque to compilers)."""
        if not isinstance(nstep, int) or nstep < 1:
            raise ValueError(f"nstep must be an int >= 1, got {nstep!r}")
        self._validate(rows, ctrl=ctrl)
        return torch.ops.gpuvec.mujoco_warp_step(self.handle, rows, ctrl, nstep)

    def forward(self, rows: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """:meth:`run_forward` as the custom op ``gpuvec::mujoco_warp_forward``."""
        self._validate(rows, mask=mask)
        return torch.ops.gpuvec.mujoco_warp_forward(self.handle, rows, mask)

    def run_step(
        self, rows: torch.Tensor, ctrl: torch.Tensor, nstep: int
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Advances every env by ``nstep`` MuJoCo substeps (then the post-constraint pass).

        Args:
            rows: (N, K) physics rows (any float dtype; computed in float32).
            ctrl: (N, nu) controls (any float dtype; MuJoCo clamps to ctrlrange).
            nstep: substeps per call (the env's frame_skip), >= 1.

        Returns:
            rows: (N, K) float32 new rows, a fresh tensor.
            derived: (N, D) float32 ``fields`` after the step, a fresh tensor.
            warned: (N,) bool: the env's qpos, qvel or qacc became NaN or beyond 1e10 (MuJoCo's
                bad-state warnings), or a MuJoCo Warp buffer (contacts, constraint rows)
                overflowed. A bad state is reset: its row is ``reset_row`` (``mj_resetData``)
                and its derived fields ``reset_derived``, where MuJoCo C resets mid step and
                runs the remaining substeps from there. An overflowed env is only reported.
        """
        w = self._checked_world(rows, ctrl=ctrl)
        if not isinstance(nstep, int) or nstep < 1:
            raise ValueError(f"nstep must be an int >= 1, got {nstep!r}")
        v = w.views
        self._write_rows(w, rows)
        v["ctrl"].copy_(ctrl)
        v["overflow"].zero_()
        self._run(w, nstep)
        qpos_ok = (v["qpos"].abs() <= MAXVAL).all(1)  # NaN compares False
        qvel_ok = (v["qvel"].abs() <= MAXVAL).all(1)
        qacc_ok = (v["qacc"].abs() <= MAXVAL).all(1)
        bad = ~(qpos_ok & qvel_ok & qacc_ok)[:, None]
        new_rows = torch.where(bad, self._reset_row, self._read_rows(w))
        derived = torch.where(bad, self.reset_derived, self._read_derived(w))
        return new_rows, derived, bad[:, 0] | (v["overflow"] != 0)

    def run_forward(self, rows: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """Derived fields at ``rows`` as gymnasium's reset leaves them.

        Mirrors ``mj_resetData``, ``mj_setState(rows)``, ``mj_forward``: ctrl is 0 and the
        fields only ``mj_rnePostConstraint`` writes (``cacc``, ``cfrc_int``, ``cfrc_ext``)
        are 0. Computed for every env (one batched pass), returned where ``mask``, 0 elsewhere.

        Args:
            rows: (N, K) physics rows.
            mask: (N,) bool, or None for every env.

        Returns:
            (N, D) float32 derived fields, a fresh tensor.
        """
        w = self._checked_world(rows, mask=mask)
        v = w.views
        self._write_rows(w, rows)
        v["ctrl"].zero_()
        self._run(w, 0)
        for name in _RNE_POST_FIELDS:
            if name in self.fields and not self.wp_model.sensor_rne_postconstraint:
                v[name].zero_()
        derived = self._read_derived(w)
        return derived if mask is None else torch.where(mask[:, None], derived, 0.0)

    def fake_step(
        self, rows: torch.Tensor, ctrl: torch.Tensor, nstep: int
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Empty outputs shaped as :meth:`step`'s (a custom op's fake implementation)."""
        n = rows.shape[0]
        f32 = torch.float32
        return (
            rows.new_empty((n, self.row_size), dtype=f32),
            rows.new_empty((n, self.derived_size), dtype=f32),
            rows.new_empty((n,), dtype=torch.bool),
        )

    def fake_forward(self, rows: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """An empty output shaped as :meth:`forward`'s (a custom op's fake implementation)."""
        return rows.new_empty((rows.shape[0], self.derived_size), dtype=torch.float32)

    def prepare(self, n: int, nstep: int | None = None) -> None:
        """Allocates the Data of ``n`` worlds and builds kernels and graphs ahead of use.

        Call it before capturing an env step in a torch CUDA graph: kernel builds and module
        loads block and cannot run inside a capture on older drivers.
        """
        w = self._world(n)
        if nstep is not None and self.graph:
            self._graph_for(w, nstep)

    # ----------------------------------------------------------------- rows <-> Data

    def _write_rows(self, w: _World, rows: torch.Tensor) -> None:
        v, nq, nv, na = w.views, self.nq, self.nv, self.na
        v["time"].copy_(rows[:, 0])
        v["qpos"].copy_(rows[:, 1 : 1 + nq])
        v["qvel"].copy_(rows[:, 1 + nq : 1 + nq + nv])
        if na:
            v["act"].copy_(rows[:, 1 + nq + nv : 1 + nq + nv + na])
        v["qacc_warmstart"].copy_(rows[:, 1 + nq + nv + na :])

    def _read_rows(self, w: _World) -> torch.Tensor:
        v = w.views
        parts = [v["time"][:, None], v["qpos"], v["qvel"]]
        if self.na:
            parts.append(v["act"])
        parts.append(v["qacc_warmstart"])
        return torch.cat(parts, dim=1)

    def _read_derived(self, w: _World) -> torch.Tensor:
        if not self.fields:
            return w.views["qpos"].new_empty((w.n, 0))
        return torch.cat([w.views[f].reshape(w.n, -1) for f in self.fields], dim=1)

    def _checked_world(
        self,
        rows: torch.Tensor,
        ctrl: torch.Tensor | None = None,
        mask: torch.Tensor | None = None,
    ) -> _World:
        self._validate(rows, ctrl, mask)
        n = rows.shape[0]
        if (
            n not in self._worlds
            and self.device.type == "cuda"
            and torch.cuda.is_current_stream_capturing()
        ):
            raise RuntimeError(
                f"WarpEngine.prepare({n}) must run before a CUDA graph capture of a step with "
                f"{n} envs (it allocates and builds kernels, which a capture cannot hold)"
            )
        return self._world(n)

    def _validate(
        self,
        rows: torch.Tensor,
        ctrl: torch.Tensor | None = None,
        mask: torch.Tensor | None = None,
    ) -> None:
        """Raises ValueError naming the problem with the inputs' shapes or devices."""
        if rows.ndim != 2 or rows.shape[1] != self.row_size:
            raise ValueError(f"rows must have shape (N, {self.row_size}), got {tuple(rows.shape)}")
        n = rows.shape[0]
        if n < 1:
            raise ValueError("rows must hold at least one env")
        if rows.device != self.device:
            raise ValueError(f"rows are on {rows.device}, the engine on {self.device}")
        if ctrl is not None and (tuple(ctrl.shape) != (n, self.nu) or ctrl.device != self.device):
            raise ValueError(
                f"ctrl must have shape ({n}, {self.nu}) on {self.device}, "
                f"got {tuple(ctrl.shape)} on {ctrl.device}"
            )
        if mask is not None and (tuple(mask.shape) != (n,) or mask.dtype != torch.bool):
            raise ValueError(
                f"mask must be a ({n},) bool tensor, got {tuple(mask.shape)} {mask.dtype}"
            )

    # ----------------------------------------------------------------- Warp side

    def _world(self, n: int) -> _World:
        """The Data of ``n`` worlds (allocated, its kernels built and warmed on first use)."""
        w = self._worlds.get(n)
        if w is not None:
            return w
        wp, mjw = self._wp, self._mjw
        with wp.ScopedDevice(self._wp_device):
            data = mjw.make_data(self.mj_model, nworld=n, nconmax=self.nconmax, njmax=self.njmax)
            names = {"time", "qpos", "qvel", "act", "qacc_warmstart", "ctrl", "qacc", "overflow"}
            names.update(self.fields)
            names.update(_RNE_POST_FIELDS)
            views = {}
            for name in sorted(names):
                arr = getattr(data, name, None)
                if arr is None or not isinstance(arr, wp.array) or arr.shape[:1] != (n,):
                    raise ValueError(
                        f"{name!r} is not a per-world array of mujoco_warp.Data, so it cannot "
                        "be a derived field"
                    )
                views[name] = wp.to_torch(arr)
            w = _World(n=n, data=data, views=views)
            # warm up: build and load every kernel outside any capture (blocking, once)
            views["qpos"].copy_(torch.as_tensor(self.mj_model.qpos0, dtype=torch.float32))
            wp.synchronize_device(self._wp_device)
            self._launch(w, 0)
            self._launch(w, 1)
            wp.synchronize_device(self._wp_device)
        self._worlds[n] = w
        return w

    def _launch(self, w: _World, nstep: int) -> None:
        """Launches the Warp work: ``nstep`` steps (+ rne_post), or a forward if nstep == 0."""
        mjw, m, d = self._mjw, self.wp_model, w.data
        if nstep == 0:
            mjw.forward(m, d)
            return
        for _ in range(nstep):
            mjw.step(m, d)
        if self.rne_post:
            mjw.rne_postconstraint(m, d)

    def _graph_for(self, w: _World, nstep: int) -> Any:
        """The Warp graph of ``_launch(w, nstep)``, captured on first use (blocking, once)."""
        g = w.graphs.get(nstep)
        if g is None:
            wp = self._wp
            # captured on Warp's stream of the device (as mjlab does), replayed on torch's
            wp.synchronize_device(self._wp_device)
            with _no_gc(), wp.ScopedDevice(self._wp_device):
                with wp.ScopedCapture(device=self._wp_device) as cap:
                    self._launch(w, nstep)
            wp.synchronize_device(self._wp_device)
            g = w.graphs[nstep] = cap.graph
        return g

    def _run(self, w: _World, nstep: int) -> None:
        """Runs the Warp work on torch's current stream (graph replay, capture, or eager)."""
        wp = self._wp
        if self.device.type == "cpu":
            with wp.ScopedDevice(self._wp_device):
                if self.graph:
                    wp.capture_launch(self._graph_for(w, nstep))
                else:
                    self._launch(w, nstep)
            return
        tstream = torch.cuda.current_stream(self.device)
        wstream = self._streams.get(tstream.cuda_stream)
        if wstream is None:
            wstream = self._streams[tstream.cuda_stream] = wp.stream_from_torch(tstream)
        if torch.cuda.is_current_stream_capturing():
            if not self.external_capture:
                raise RuntimeError(
                    "a MuJoCo Warp step inside a torch CUDA graph capture: MuJoCo Warp's "
                    "conditional graph nodes end and restart the stream capture, which gives it "
                    "a new capture id that torch's graph memory pool does not follow. Keep the "
                    "step outside the capture (torch.compile's graph partition does: the ops "
                    "are tagged cudagraph_unsafe) or pass external_capture=True to try it"
                )
            # register the torch capture with Warp and launch into it (conditional nodes too)
            with (
                _no_gc(),
                wp.ScopedDevice(self._wp_device),
                wp.ScopedStream(wstream, sync_enter=False),
            ):
                wp.capture_begin(stream=wstream, external=True, force_module_load=False)
                try:
                    self._launch(w, nstep)
                finally:
                    w.keep.append(wp.capture_end(stream=wstream))
            return
        graph = self._graph_for(w, nstep) if self.graph else None
        with wp.ScopedDevice(self._wp_device), wp.ScopedStream(wstream, sync_enter=False):
            if graph is not None:
                wp.capture_launch(graph, stream=wstream)
            else:
                self._launch(w, nstep)


# -- custom ops: the engine's calls as single opaque nodes for torch.compile -------------

_HANDLES = itertools.count(1)
_BY_HANDLE: weakref.WeakValueDictionary[int, WarpEngine] = weakref.WeakValueDictionary()


def _engine_of(handle: int) -> WarpEngine:
    eng = _BY_HANDLE.get(handle)
    if eng is None:
        raise RuntimeError(f"no MuJoCo Warp engine {handle} in this process")
    return eng


_TAGS = (torch.Tag.cudagraph_unsafe,) if hasattr(torch.Tag, "cudagraph_unsafe") else ()


@torch.library.custom_op("gpuvec::mujoco_warp_step", mutates_args=(), tags=_TAGS)
def _mujoco_warp_step(
    handle: int, rows: torch.Tensor, ctrl: torch.Tensor, nstep: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return _engine_of(handle).run_step(rows, ctrl, nstep)


@_mujoco_warp_step.register_fake
def _(
    handle: int, rows: torch.Tensor, ctrl: torch.Tensor, nstep: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return _engine_of(handle).fake_step(rows, ctrl, nstep)


@torch.library.custom_op("gpuvec::mujoco_warp_forward", mutates_args=(), tags=_TAGS)
def _mujoco_warp_forward(
    handle: int, rows: torch.Tensor, mask: torch.Tensor | None
) -> torch.Tensor:
    return _engine_of(handle).run_forward(rows, mask)


@_mujoco_warp_forward.register_fake
def _(handle: int, rows: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    return _engine_of(handle).fake_forward(rows, mask)
