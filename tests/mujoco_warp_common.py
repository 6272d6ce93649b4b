"""MuJoCo C reference for the MuJoCo Warp engine's parity checks (tests and tools).

Shared by tests/test_mujoco_warp.py and tools/gpu_mujoco_check.py: gymnasium's eleven v5
MuJoCo models with their frame_skips and the MjData fields each env reads, reference states
from MuJoCo C rollouts, and one env step on MuJoCo C from a physics row
(``mj_setState``, ctrl, ``mj_step`` frame_skip times, ``mj_rnePostConstraint``), as
gymnasium's ``MujocoEnv.do_simulation`` does it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import mujoco
import numpy as np
import torch

ROW_SPEC = (
    mujoco.mjtState.mjSTATE_TIME
    | mujoco.mjtState.mjSTATE_QPOS
    | mujoco.mjtState.mjSTATE_QVEL
    | mujoco.mjtState.mjSTATE_ACT
    | mujoco.mjtState.mjSTATE_WARMSTART
)
"""``mj_getState`` spec whose layout is the engine's row: [time, qpos, qvel, act, warmstart]."""


@dataclass(frozen=True)
class GymModel:
    """One of gymnasium's v5 MuJoCo envs, as the physics sees it.

    Attributes:
        env: gymnasium env name.
        xml: file under gymnasium/envs/mujoco/assets.
        frame_skip: substeps per env step.
        fields: MjData fields the env reads for observation or reward (besides qpos, qvel).
    """

    env: str
    xml: str
    frame_skip: int
    fields: tuple[str, ...]


_HUMANOID = ("cinert", "cvel", "qfrc_actuator", "cfrc_ext")
GYM_V5 = (
    GymModel("Ant-v5", "ant.xml", 5, ("xpos", "cfrc_ext")),
    GymModel("HalfCheetah-v5", "half_cheetah.xml", 5, ()),
    GymModel("Hopper-v5", "hopper.xml", 4, ()),
    GymModel("Humanoid-v5", "humanoid.xml", 5, ("xipos", *_HUMANOID)),
    GymModel("HumanoidStandup-v5", "humanoidstandup.xml", 5, _HUMANOID),
    GymModel(
        "InvertedDoublePendulum-v5",
        "inverted_double_pendulum.xml",
        5,
        ("qfrc_constraint", "site_xpos"),
    ),
    GymModel("InvertedPendulum-v5", "inverted_pendulum.xml", 2, ()),
    GymModel("Pusher-v5", "pusher_v5.xml", 5, ("xpos",)),
    GymModel("Reacher-v5", "reacher.xml", 2, ("xpos",)),
    GymModel("Swimmer-v5", "swimmer.xml", 4, ()),
    GymModel("Walker2d-v5", "walker2d_v5.xml", 4, ()),
)
BY_XML = {g.xml: g for g in GYM_V5}


def load_model(xml: str) -> mujoco.MjModel:
    """Compiles one of gymnasium's MuJoCo XMLs."""
    import gymnasium

    path = os.path.join(os.path.dirname(gymnasium.__file__), "envs", "mujoco", "assets", xml)
    return mujoco.MjModel.from_xml_path(path)


def reference_states(
    model: mujoco.MjModel, frame_skip: int, steps: tuple[int, ...], seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """States of MuJoCo C rollouts under random controls, and a random control for each.

    Each state starts from gymnasium-like reset noise (qpos0 + U(-0.1, 0.1), qvel N(0, 0.1))
    and runs ``steps[i]`` env steps of uniform random controls; states are rounded to
    float32 so that the float32 engine and MuJoCo C start from the same numbers.

    Returns:
        rows: (len(steps), K) float64 rows (float32-representable).
        ctrl: (len(steps), nu) float64 controls (float32-representable).
    """
    rng = np.random.default_rng(seed)
    data = mujoco.MjData(model)
    lo, hi = model.actuator_ctrlrange[:, 0], model.actuator_ctrlrange[:, 1]
    rows, ctrls = [], []
    for k in steps:
        mujoco.mj_resetData(model, data)
        data.qpos[:] = model.qpos0 + rng.uniform(-0.1, 0.1, model.nq)
        data.qvel[:] = rng.normal(0.0, 0.1, model.nv)
        for _ in range(k):
            data.ctrl[:] = rng.uniform(lo, hi)
            mujoco.mj_step(model, data, nstep=frame_skip)
        row = np.empty(mujoco.mj_stateSize(model, ROW_SPEC))
        mujoco.mj_getState(model, data, row, ROW_SPEC)
        rows.append(row.astype(np.float32).astype(np.float64))
        ctrls.append(rng.uniform(lo, hi).astype(np.float32).astype(np.float64))
    return np.stack(rows), np.stack(ctrls)


def c_step(
    model: mujoco.MjModel,
    rows: np.ndarray,
    ctrl: np.ndarray,
    nstep: int,
    fields: tuple[str, ...],
    rne_post: bool = True,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One env step per row on MuJoCo C (float64).

    Returns:
        rows: (N, K) rows after the step.
        derived: (N, D) ``fields`` after the step, flattened in order.
        warned: (N,) bool, MuJoCo C raised a bad-state warning (and reset the data).
    """
    data = mujoco.MjData(model)
    out_rows, out_derived, warned = [], [], []
    for row, u in zip(rows, ctrl, strict=True):
        mujoco.mj_resetData(model, data)
        mujoco.mj_setState(model, data, row, ROW_SPEC)
        data.ctrl[:] = u
        mujoco.mj_step(model, data, nstep=nstep)
        if rne_post:
            mujoco.mj_rnePostConstraint(model, data)
        new = np.empty_like(row)
        mujoco.mj_getState(model, data, new, ROW_SPEC)
        out_rows.append(new)
        out_derived.append(derived_of(data, fields))
        bad = (mujoco.mjtWarning.mjWARN_BADQPOS, mujoco.mjtWarning.mjWARN_BADQVEL)
        bad += (mujoco.mjtWarning.mjWARN_BADQACC,)
        warned.append(any(data.warning[int(b)].number > 0 for b in bad))
    return np.stack(out_rows), np.stack(out_derived), np.array(warned)


def c_forward(model: mujoco.MjModel, rows: np.ndarray, fields: tuple[str, ...]) -> np.ndarray:
    """gymnasium's reset on MuJoCo C: ``mj_resetData``, ``mj_setState``, ``mj_forward``.

    Returns:
        (N, D) ``fields`` flattened in order.
    """
    data = mujoco.MjData(model)
    out = []
    for row in rows:
        mujoco.mj_resetData(model, data)
        mujoco.mj_setState(model, data, row, ROW_SPEC)
        mujoco.mj_forward(model, data)
        out.append(derived_of(data, fields))
    return np.stack(out)


def derived_of(data: mujoco.MjData, fields: tuple[str, ...]) -> np.ndarray:
    """``fields`` of one MjData flattened in order, shape (D,)."""
    parts = [np.asarray(getattr(data, f), dtype=np.float64).ravel() for f in fields]
    return np.concatenate(parts) if parts else np.zeros(0)


def row_slices(model: mujoco.MjModel) -> dict[str, slice]:
    """Where time, qpos, qvel, act and qacc_warmstart sit in a row."""
    nq, nv, na = model.nq, model.nv, model.na
    edges = np.cumsum([0, 1, nq, nv, na, nv])
    names = ("time", "qpos", "qvel", "act", "qacc_warmstart")
    return {n: slice(int(a), int(b)) for n, a, b in zip(names, edges[:-1], edges[1:], strict=True)}


def max_diffs(
    model: mujoco.MjModel,
    fields: tuple[str, ...],
    rows: torch.Tensor | np.ndarray,
    derived: torch.Tensor | np.ndarray,
    ref_rows: np.ndarray,
    ref_derived: np.ndarray,
) -> dict[str, float]:
    """Largest |engine - MuJoCo C| per row part and per field (one number each)."""
    rows = np.asarray(torch.as_tensor(rows).double().cpu())
    derived = np.asarray(torch.as_tensor(derived).double().cpu())
    out = {}
    for name, sl in row_slices(model).items():
        if sl.stop > sl.start and name != "qacc_warmstart":
            out[name] = float(np.abs(rows[:, sl] - ref_rows[:, sl]).max())
    for f, sl in field_slices(model, fields).items():
        out[f] = float(np.abs(derived[:, sl] - ref_derived[:, sl]).max())
    return out


def scale(ref: np.ndarray) -> float:
    """max(1, max |ref|): the magnitude a float32 tolerance is relative to."""
    return float(max(1.0, np.abs(ref).max())) if ref.size else 1.0


ATOL = {"time": 1e-6, "qpos": 2e-5, "qvel": 5e-4, "act": 1e-5}
"""|Warp - C| <= ATOL[part] * max(1, max|C part|) after one env step in float32."""
FIELD_ATOL = 5e-4
"""The same for each derived field."""


def field_slices(model: mujoco.MjModel, fields: tuple[str, ...]) -> dict[str, slice]:
    """Where each field sits in a derived row."""
    data, start, out = mujoco.MjData(model), 0, {}
    for f in fields:
        size = np.asarray(getattr(data, f)).size
        out[f] = slice(start, start + size)
        start += size
    return out


def tolerance_failures(
    model: mujoco.MjModel,
    fields: tuple[str, ...],
    diffs: dict[str, float],
    ref_rows: np.ndarray,
    ref_derived: np.ndarray,
) -> list[str]:
    """Quantities whose largest difference exceeds its tolerance (empty: all within)."""
    rows_at, fields_at = row_slices(model), field_slices(model, fields)
    out = []
    for name, diff in diffs.items():
        if name in ATOL:
            bound = ATOL[name] * scale(ref_rows[:, rows_at[name]])
        else:
            bound = FIELD_ATOL * scale(ref_derived[:, fields_at[name]])
        if not diff <= bound:
            out.append(f"{name}: |Warp - C| = {diff:.3g} > {bound:.3g}")
    return out


def steep_capsule_contact(
    model: mujoco.MjModel, row: np.ndarray, ctrl: np.ndarray, nstep: int, limit: float = 0.5
) -> bool:
    """Whether a plane-capsule contact with a steep capsule occurs during one env step.

    Steep: the capsule's axis projected on the plane is shorter than ``limit``. MuJoCo Warp
    (collision_primitive_core.plane_capsule) then gives the contact a fixed tangent frame,
    MuJoCo C the projected axis; with pyramidal friction cones the two engines' forces
    differ there by more than float32 rounding. Checked at the start of each substep and
    at the end.
    """
    data = mujoco.MjData(model)
    mujoco.mj_setState(model, data, row, ROW_SPEC)
    data.ctrl[:] = ctrl
    plane, capsule = mujoco.mjtGeom.mjGEOM_PLANE, mujoco.mjtGeom.mjGEOM_CAPSULE
    for k in range(nstep + 1):  # each substep's start, and the end state
        mujoco.mj_forward(model, data)
        for c in data.contact[: data.ncon]:
            types = model.geom_type[c.geom]
            if plane in types and capsule in types:
                g = c.geom[types == capsule][0]
                p = c.geom[types == plane][0]
                axis = data.geom_xmat[g].reshape(3, 3)[:, 2]
                n = data.geom_xmat[p].reshape(3, 3)[:, 2]
                if np.linalg.norm(axis - n * axis.dot(n)) < limit:
                    return True
        if k < nstep:
            mujoco.mj_step(model, data)
    return False
