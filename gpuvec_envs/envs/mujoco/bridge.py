"""The one module of the MuJoCo family that calls MuJoCo: models, engines, torch ops.

A simulation is a float64 state row ``[time, qpos, qvel, act, qacc_warmstart]`` (MuJoCo's
``mj_getState`` with ``mjSTATE_FULLPHYSICS | mjSTATE_WARMSTART``); a batch is an (N, K)
tensor of rows. An :class:`Engine` (one per model, requested fields and device; N-agnostic)
steps rows and computes the requested ``mjData`` fields ("derived": xpos, cfrc_ext, ...)
flattened into an (N, D) float64 tensor in the order asked:

* on the CPU, :class:`CEngine`: a small C thread pool of our own over ``mj_step``
  (``_engine.c``, compiled on first use with the system C compiler and loaded with
  ctypes), one scratch ``mjData`` per thread. Each call runs ``mj_step`` ``nstep`` times
  and then ``mj_rnePostConstraint`` if asked, exactly as gymnasium's ``MujocoEnv`` does,
  so results are bitwise gymnasium's;
* on a CUDA device (or with ``engine="warp"``, also on the CPU, for tests),
  ``gpuvec_envs.envs.mujoco._warp``'s ``WarpEngine`` (MuJoCo Warp, float32), imported
  only then.

Engine calls are torch custom ops (``gpuvec::mujoco_step``, ``gpuvec::mujoco_forward``)
with fake implementations, so compiled env steps call them as opaque kernels; the engine
is found by an int handle in this module's registry, so env definitions stay stateless.
"""

from __future__ import annotations

import ctypes
import dataclasses
import functools
import hashlib
import os
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch

INSTALL_HINT = 'pip install "gpuvec_envs[mujoco]"'

#: ``mjData`` fields an engine can copy out, in ``_engine.c``'s ``field_ptr`` order.
FIELDS: tuple[str, ...] = (
    "xpos",
    "xipos",
    "xquat",
    "cfrc_ext",
    "cfrc_int",
    "site_xpos",
    "cinert",
    "cvel",
    "cacc",
    "qfrc_actuator",
    "qfrc_constraint",
    "ten_length",
    "ten_velocity",
    "subtree_com",
    "sensordata",
    "actuator_force",
    "qacc",
    "ctrl",
)


def mujoco_module() -> Any:
    """The ``mujoco`` package, or an ``ImportError`` that says how to install it."""
    try:
        import mujoco
    except ImportError as exc:
        raise ImportError(
            f"the gpuvec MuJoCo environments need the mujoco package: {INSTALL_HINT}"
        ) from exc
    return mujoco


def _row_spec(mujoco: Any) -> int:
    s = mujoco.mjtState
    return int(s.mjSTATE_FULLPHYSICS | s.mjSTATE_WARMSTART)


# -- models ----------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class ModelInfo:
    """What env definitions read from a model (constants, plain Python/numpy values)."""

    path: str  # the XML file
    nq: int
    nv: int
    nu: int
    na: int
    nbody: int
    timestep: float  # [s] one mj_step
    qpos0: np.ndarray  # (nq,) float64, gymnasium's init_qpos
    ctrlrange: np.ndarray  # (nu, 2) float64
    body_mass: np.ndarray  # (nbody,) float64 [kg]
    body_names: tuple[str, ...]
    field_shapes: dict[str, tuple[int, ...]]  # one env's shape of each FIELDS entry

    @property
    def row_size(self) -> int:
        """K, the length of a state row: ``1 + nq + nv + na + nv``."""
        return 1 + self.nq + 2 * self.nv + self.na

    def body_id(self, body: int | str) -> int:
        """Index of a body given by name or index.

        Raises:
            ValueError: no such body.
        """
        if isinstance(body, str):
            if body not in self.body_names:
                raise ValueError(f"no body {body!r} in {self.path}; bodies: {self.body_names}")
            return self.body_names.index(body)
        if not 0 <= body < self.nbody:
            raise ValueError(f"body index {body} outside [0, {self.nbody}) in {self.path}")
        return body


@functools.lru_cache(maxsize=256)
def asset_path(xml_file: str) -> str:
    """Full path of ``xml_file`` as gymnasium's ``expand_model_path`` resolves it (cached).

    A relative name (``"ant.xml"``) is one of gymnasium's MuJoCo assets; a path starting
    with ``.``, ``/`` or ``~`` is the user's.

    Raises:
        OSError: the file does not exist.
    """
    if xml_file.startswith((".", "/")):
        full = xml_file
    elif xml_file.startswith("~"):
        full = os.path.expanduser(xml_file)
    else:
        mujoco_module()  # our install hint, before gymnasium's
        import gymnasium.envs.mujoco as gm  # for its asset folder

        full = os.path.join(os.path.dirname(gm.__file__), "assets", xml_file)
    if not os.path.exists(full):
        raise OSError(f"MuJoCo model file {full} does not exist")
    return os.path.abspath(full)


#: Constraint solvers an env can ask for: ``"model"`` keeps the XML's (gymnasium's physics).
SOLVERS: tuple[str, ...] = ("model", "newton", "cg", "pgs")


@functools.lru_cache(maxsize=64)
def load_model(path: str, solver: str = "model") -> Any:
    """The ``mujoco.MjModel`` of an XML file (cached; one per path and solver).

    Args:
        path: Full path of the XML file.
        solver: One of :data:`SOLVERS`; other than ``"model"`` it replaces the model's
            ``opt.solver`` (other physics than gymnasium's where it differs).

    Raises:
        ValueError: an unknown solver.
    """
    if solver not in SOLVERS:
        raise ValueError(f"solver must be one of {SOLVERS}, got {solver!r}")
    mujoco = mujoco_module()
    model = mujoco.MjModel.from_xml_path(path)
    if solver != "model":
        model.opt.solver = getattr(mujoco.mjtSolver, f"mjSOL_{solver.upper()}")
    return model


@functools.lru_cache(maxsize=64)
def model_info(path: str) -> ModelInfo:
    """:class:`ModelInfo` of the XML file ``path`` (a full path, see :func:`asset_path`).

    Raises:
        ValueError: a model whose state rows are not ``[time, qpos, qvel, act,
            qacc_warmstart]`` (history buffers, plastic or plugin state).
    """
    mujoco = mujoco_module()
    m = load_model(path)
    d = mujoco.MjData(m)
    info = ModelInfo(
        path=path,
        nq=m.nq,
        nv=m.nv,
        nu=m.nu,
        na=m.na,
        nbody=m.nbody,
        timestep=float(m.opt.timestep),
        qpos0=d.qpos.copy(),
        ctrlrange=m.actuator_ctrlrange.copy(),
        body_mass=m.body_mass.copy(),
        body_names=tuple(m.body(i).name for i in range(m.nbody)),
        field_shapes={f: tuple(getattr(d, f).shape) for f in FIELDS},
    )
    k = mujoco.mj_stateSize(m, _row_spec(mujoco))
    if k != info.row_size:
        raise ValueError(
            f"{path}: state rows of {k} numbers, not 1 + nq + 2 nv + na = {info.row_size}"
            " (models with history, plastic or plugin state are not supported)"
        )
    return info


# -- the engine protocol and factory -------------------------------------------------


class Engine(Protocol):
    """Steps batches of state rows of one model on one device; N-agnostic."""

    nq: int
    nv: int
    nu: int
    row_size: int  # K: [time, qpos, qvel, act, qacc_warmstart]
    derived_size: int  # D: the requested fields, flattened, in order

    def step(
        self, rows: torch.Tensor, ctrl: torch.Tensor, nstep: int
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Run ``mj_step`` ``nstep`` times per simulation (then ``mj_rnePostConstraint``).

        Args:
            rows: (N, K) float64 state rows.
            ctrl: (N, nu) float64 controls.
            nstep: Physics steps.

        Returns:
            ``(rows (N, K), derived (N, D), warned (N,) bool)``; ``warned``: MuJoCo reset
            that simulation's data during the step (bad qpos, qvel, qacc or ctrl), as
            ``mj_step`` does by itself.
        """

    def forward(self, rows: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Derived (N, D) of a reset to ``rows`` where ``mask`` (N,) bool, else 0.

        As gymnasium's reset: ``mj_resetData`` (ctrl 0, and 0 in the fields
        ``mj_forward`` does not compute, such as ``cfrc_ext``), the row, ``mj_forward``.
        """


_ENGINES: dict[tuple[Any, ...], Engine] = {}
_BY_HANDLE: dict[int, CEngine] = {}
_LOCK = threading.Lock()


def engine(
    model_key: str,
    fields: tuple[str, ...],
    rne_post: bool,
    device: torch.device | str,
    kind: str = "auto",
    solver: str = "model",
) -> Engine:
    """The (cached) engine of the model at ``model_key`` (a full XML path) on ``device``.

    Args:
        model_key: Full path of the model's XML file (:func:`asset_path`).
        fields: ``mjData`` field names (:data:`FIELDS`), flattened into ``derived`` in
            this order.
        rne_post: Call ``mj_rnePostConstraint`` after stepping (cfrc_ext, cacc, cfrc_int).
        device: The device of the state tensors.
        kind: ``"auto"`` (C on the CPU, Warp on CUDA), ``"c"`` or ``"warp"``.
        solver: The constraint solver (:data:`SOLVERS`); ``"model"`` keeps the XML's.
            MuJoCo Warp has no PGS, which Humanoid's and HumanoidStandup's XMLs use: on
            Warp they need ``"newton"`` (or ``"cg"``).

    Raises:
        ValueError: an unknown field, kind or solver, or the C engine on a non-CPU device.
        NotImplementedError: Warp and a model feature it lacks (PGS: names ``solver``).
        ImportError: mujoco (or, for Warp, mujoco_warp) is not installed.
    """
    device = torch.device(device)
    unknown = [f for f in fields if f not in FIELDS]
    if unknown:
        raise ValueError(f"unknown mjData field(s) {unknown}; known: {FIELDS}")
    if kind == "auto":
        kind = "c" if device.type == "cpu" else "warp"
    if kind not in ("c", "warp"):
        raise ValueError(f"engine must be 'auto', 'c' or 'warp', got {kind!r}")
    if solver not in SOLVERS:
        raise ValueError(f"solver must be one of {SOLVERS}, got {solver!r}")
    key = (model_key, tuple(fields), bool(rne_post), str(device), kind, solver)
    eng = _ENGINES.get(key)
    if eng is not None:
        return eng
    with _LOCK:
        eng = _ENGINES.get(key)
        if eng is None:
            if kind == "c":
                if device.type != "cpu":
                    raise ValueError(f"the C MuJoCo engine runs on the CPU, not {device}")
                eng = CEngine(model_key, tuple(fields), bool(rne_post), solver)
            else:
                eng = _warp_engine(model_key, tuple(fields), bool(rne_post), device, solver)
            _ENGINES[key] = eng
    return eng


def _on_own_thread(make: Callable[[], Any]) -> Any:
    """``make()`` run on a fresh thread, its result or its exception.

    torch's dispatch modes (a trace's fake tensors and proxies) are per thread, so an
    engine first met while a step is traced (a background compile in a child process)
    still computes its reset tensors with real Warp kernels.
    """
    out: dict[str, Any] = {}

    def run() -> None:
        try:
            out["value"] = make()
        except BaseException as exc:  # noqa: BLE001 - re-raised on the caller's thread
            out["error"] = exc

    thread = threading.Thread(target=run, name="gpuvec-mujoco-warp-build")
    thread.start()
    thread.join()
    if "error" in out:
        raise out["error"]
    return out["value"]


def _stable_handle(*key: Any) -> int:
    """An engine's key in its custom ops' registry, the same in every process.

    A step compiled in a child process (the shell's background compile) embeds it.
    """
    return int.from_bytes(hashlib.sha256(repr(key).encode()).digest()[:7], "little")


def _warp_engine(
    model_key: str, fields: tuple[str, ...], rne_post: bool, device: torch.device, solver: str
) -> Engine:
    """A MuJoCo Warp engine (``_warp.WarpEngine``; imports Warp, which is optional)."""
    if solver == "pgs":
        raise ValueError("MuJoCo Warp has no PGS solver: pass solver='newton' or 'cg'")
    try:
        from gpuvec_envs.envs.mujoco import _warp  # lazy: Warp is optional
    except ImportError as exc:
        raise ImportError(
            f"the MuJoCo Warp engine (CUDA, or engine='warp') needs mujoco-warp: {INSTALL_HINT}"
        ) from exc
    if device.type == "cuda" and device.index is None:  # the caller's, not the thread's
        device = torch.device("cuda", torch.cuda.current_device())

    def make() -> Any:
        eng = _warp.WarpEngine(
            load_model(model_key),
            fields,
            rne_post,
            device,
            solver=None if solver == "model" else solver,  # type: ignore[arg-type]
            handle=_stable_handle(model_key, fields, rne_post, str(device), "warp", solver),
        )
        if device.type == "cuda":  # its reset tensors, computed on this thread's stream
            torch.cuda.synchronize(device)
        return eng

    return _on_own_thread(make)


# -- the C engine ----------------------------------------------------------------------


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "gpuvec_envs"


@functools.lru_cache(maxsize=1)
def _library() -> ctypes.CDLL:
    """``_engine.c`` built against the installed mujoco (cached on disk) and loaded.

    Raises:
        RuntimeError: no C compiler, or the build failed (with the compiler's output).
    """
    mujoco = mujoco_module()
    pkg = Path(mujoco.__file__).parent
    libs = sorted(pkg.glob("libmujoco.so*"))
    if not libs:
        raise RuntimeError(f"no libmujoco.so* in {pkg}; reinstall mujoco: {INSTALL_HINT}")
    libmujoco = libs[-1]
    source = Path(__file__).with_name("_engine.c")
    text = source.read_bytes()
    digest = hashlib.sha256(text + mujoco.__version__.encode() + str(libmujoco).encode())
    out = _cache_dir() / f"mujoco_engine_{digest.hexdigest()[:16]}.so"
    if not out.exists():
        cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
        if cc is None:
            raise RuntimeError(
                "the gpuvec MuJoCo CPU engine is compiled on first use and needs a C "
                "compiler: install one (Debian/Ubuntu: `apt-get install gcc`; conda: "
                "`conda install -c conda-forge c-compiler`) or set CC"
            )
        out.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(suffix=".so", dir=out.parent)
        os.close(fd)
        cmd = [
            cc,
            "-O2",
            "-shared",
            "-fPIC",
            "-I",
            str(pkg / "include"),
            "-o",
            tmp,
            str(source),
            str(libmujoco),
            f"-Wl,-rpath,{pkg}",
            "-lpthread",
        ]
        res = subprocess.run(cmd, capture_output=True, text=True)
        if res.returncode != 0:
            os.unlink(tmp)
            raise RuntimeError(
                f"building the MuJoCo CPU engine failed ({' '.join(cmd)}):\n{res.stderr}"
            )
        os.replace(tmp, out)  # atomic: parallel builders each write their own file
    lib = ctypes.CDLL(str(out))
    p, i = ctypes.c_void_p, ctypes.c_int
    lib.gv_create.restype = p
    lib.gv_create.argtypes = [p, i]
    lib.gv_free.argtypes = [p]
    lib.gv_step.restype = i
    lib.gv_step.argtypes = [p, i, p, p, i, i, p, p, p, i, p, p, i]
    lib.gv_forward.restype = i
    lib.gv_forward.argtypes = [p, i, p, p, p, i, p, p, i]
    return lib


def _ptr(t: torch.Tensor) -> int:
    return t.data_ptr()


class CEngine:
    """The CPU engine: ``_engine.c``'s thread pool over ``mj_step`` (see the module doc).

    Threads per call: ``torch.get_num_threads()`` (the env's thread count), fewer for
    small batches; results do not depend on the count.
    """

    #: Most threads one engine uses (each holds a scratch mjData).
    MAX_THREADS = 64
    #: Simulations per thread below which a call runs on fewer threads.
    MIN_PER_THREAD = 4

    def __init__(
        self, model_key: str, fields: tuple[str, ...], rne_post: bool, solver: str = "model"
    ) -> None:
        self.info = model_info(model_key)
        self.model = load_model(model_key, solver)  # kept alive: the C side holds its pointer
        self.fields = fields
        self.rne_post = rne_post
        self.nq, self.nv, self.nu = self.info.nq, self.info.nv, self.info.nu
        self.row_size = self.info.row_size
        sizes = [int(np.prod(self.info.field_shapes[f])) for f in fields]
        self.derived_size = sum(sizes)
        self._ids = (ctypes.c_int * max(1, len(fields)))(*[FIELDS.index(f) for f in fields])
        self._sizes = (ctypes.c_int64 * max(1, len(fields)))(*sizes)
        self._lib = _library()
        self._handle = self._lib.gv_create(self.model._address, self.MAX_THREADS)
        if not self._handle:
            raise MemoryError("could not create the MuJoCo engine")
        self.handle = _stable_handle(model_key, fields, rne_post, "cpu", solver)
        _BY_HANDLE[self.handle] = self

    def _threads(self, n: int) -> int:
        return max(1, min(torch.get_num_threads(), n // self.MIN_PER_THREAD))

    def run_step(
        self, rows: torch.Tensor, ctrl: torch.Tensor, nstep: int
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """:meth:`step` on real CPU tensors (the custom op's body)."""
        n = rows.shape[0]
        rows = rows.contiguous()
        ctrl = ctrl.to(torch.float64).contiguous()
        out = torch.empty_like(rows)
        derived = torch.empty((n, self.derived_size), dtype=torch.float64)
        warned = torch.empty(n, dtype=torch.bool)  # written as bytes 0/1
        if n:
            rc = self._lib.gv_step(
                self._handle,
                n,
                _ptr(rows),
                _ptr(ctrl),
                int(nstep),
                int(self.rne_post),
                _ptr(out),
                _ptr(derived),
                _ptr(warned),
                len(self.fields),
                self._ids,
                self._sizes,
                self._threads(n),
            )
            if rc:
                raise RuntimeError(f"MuJoCo engine step failed ({rc})")
        return out, derived, warned

    def run_forward(self, rows: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """:meth:`forward` on real CPU tensors (the custom op's body)."""
        n = rows.shape[0]
        rows = rows.contiguous()
        mask8 = mask.to(torch.uint8).contiguous()
        derived = torch.empty((n, self.derived_size), dtype=torch.float64)
        if n:
            rc = self._lib.gv_forward(
                self._handle,
                n,
                _ptr(rows),
                _ptr(mask8),
                _ptr(derived),
                len(self.fields),
                self._ids,
                self._sizes,
                self._threads(int(mask8.sum())) if n > 1 else 1,
            )
            if rc:
                raise RuntimeError(f"MuJoCo engine forward failed ({rc})")
        return derived

    def step(
        self, rows: torch.Tensor, ctrl: torch.Tensor, nstep: int
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """See :class:`Engine`; a ``gpuvec::mujoco_step`` call (opaque to compilers)."""
        return torch.ops.gpuvec.mujoco_step(self.handle, rows, ctrl.to(torch.float64), nstep)

    def forward(self, rows: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """See :class:`Engine`; a ``gpuvec::mujoco_forward`` call (opaque to compilers)."""
        return torch.ops.gpuvec.mujoco_forward(self.handle, rows, mask)

    def __del__(self) -> None:
        """Free the C engine's scratch data."""
        handle, self._handle = getattr(self, "_handle", None), None
        if handle:
            self._lib.gv_free(handle)


def _engine_of(handle: int) -> CEngine:
    eng = _BY_HANDLE.get(handle)
    if eng is None:
        raise RuntimeError(
            f"no MuJoCo engine {handle} in this process (a step compiled elsewhere runs "
            "only after the env has made its engine: reset() the env first)"
        )
    return eng


@torch.library.custom_op("gpuvec::mujoco_step", mutates_args=())
def _mujoco_step(
    handle: int, rows: torch.Tensor, ctrl: torch.Tensor, nstep: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return _engine_of(handle).run_step(rows, ctrl, nstep)


@_mujoco_step.register_fake
def _(
    handle: int, rows: torch.Tensor, ctrl: torch.Tensor, nstep: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    eng = _engine_of(handle)
    n = rows.shape[0]
    return (
        torch.empty_like(rows),
        rows.new_empty((n, eng.derived_size)),
        rows.new_empty((n,), dtype=torch.bool),
    )


@torch.library.custom_op("gpuvec::mujoco_forward", mutates_args=())
def _mujoco_forward(handle: int, rows: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return _engine_of(handle).run_forward(rows, mask)


@_mujoco_forward.register_fake
def _(handle: int, rows: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return rows.new_empty((rows.shape[0], _engine_of(handle).derived_size))


# -- rendering -------------------------------------------------------------------------
class _Renderer:
    """``mujoco.Renderer`` of one model and frame size, with a scratch ``mjData``."""

    def __init__(self, path: str, width: int, height: int) -> None:
        mujoco = mujoco_module()
        self.model = mujoco.MjModel.from_xml_path(path)  # its own: the framebuffer grows
        glob = self.model.vis.global_
        glob.offwidth, glob.offheight = max(glob.offwidth, width), max(glob.offheight, height)
        self.data = mujoco.MjData(self.model)
        try:
            self.renderer = mujoco.Renderer(self.model, height, width)
        except Exception as exc:  # noqa: BLE001 - every backend failure reads the same
            raise RuntimeError(
                "MuJoCo rendering needs an OpenGL backend: set MUJOCO_GL=egl (a GPU with "
                "EGL) or MUJOCO_GL=osmesa (software; `apt-get install libosmesa6`) before "
                f"importing mujoco ({type(exc).__name__}: {exc})"
            ) from exc


_RENDERERS: dict[tuple[str, int, int, int], _Renderer] = {}


def render(
    model_key: str,
    rows: torch.Tensor,
    width: int,
    height: int,
    camera: tuple[tuple[str, Any], ...] = (),
) -> torch.Tensor:
    """RGB frames of state rows as gymnasium's ``MujocoRenderer`` draws ``rgb_array``.

    A free camera looking at the median of the geoms' positions from ``stat.extent`` away
    (gymnasium's ``OffScreenViewer``), then the task's ``default_camera_config``
    (``camera``: ``(attribute, value)`` pairs of ``mujoco.MjvCamera``).

    Args:
        model_key: Full path of the model's XML file.
        rows: (M, K) float64 state rows (any device).
        width: Frame width [px].
        height: Frame height [px].
        camera: The camera settings.

    Returns:
        (M, height, width, 3) uint8 frames on the CPU.

    Raises:
        RuntimeError: no OpenGL backend (names the ``MUJOCO_GL`` settings to try).
    """
    mujoco = mujoco_module()
    key = (model_key, width, height, threading.get_ident())  # GL contexts are per thread
    r = _RENDERERS.get(key)
    if r is None:
        r = _RENDERERS[key] = _Renderer(model_key, width, height)
    spec = _row_spec(mujoco)
    frames = []
    for row in rows.detach().to("cpu", torch.float64).numpy():
        mujoco.mj_setState(r.model, r.data, row, spec)
        mujoco.mj_forward(r.model, r.data)
        cam = mujoco.MjvCamera()
        cam.type = mujoco.mjtCamera.mjCAMERA_FREE
        cam.fixedcamid = -1
        cam.lookat[:] = np.median(r.data.geom_xpos, axis=0)
        cam.distance = r.model.stat.extent
        for name, value in camera:
            if isinstance(value, tuple):
                getattr(cam, name)[:] = value
            else:
                setattr(cam, name, value)
        r.renderer.update_scene(r.data, camera=cam)
        frames.append(r.renderer.render().copy())
    out = np.stack(frames) if frames else np.zeros((0, height, width, 3), np.uint8)
    return torch.from_numpy(out)
