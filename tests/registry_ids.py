"""The IDs that the generic per-ID tests (engine, checkpoints, rendering, checks) iterate.

Every registered ID but Craftax's, except that the MiniGrid IDs, many sizes of a few env
classes, are represented by the first ID of each class: their own test files
(``test_minigrid_*.py``) cover every MiniGrid ID against the reference; the MuJoCo IDs
(optional dependency, ``test_mujoco.py``) are left out. Craftax-Classic (a compile of its
step takes tens of minutes on 2 cores) has its shell features tested in
tests/test_craftax_env.py.
"""

from __future__ import annotations

from gpuvec_envs.registry import MINIGRID, MUJOCO, REGISTRY, EnvEntry


def _representatives() -> list[EnvEntry]:
    seen: set[str] = set()
    out = []
    for e in MINIGRID:
        if e.env_def not in seen:
            seen.add(e.env_def)
            out.append(e)
    return out


MINIGRID_IDS = {e.id for e in MINIGRID}
#: The MuJoCo IDs (tests/test_mujoco.py covers each against gymnasium; they need mujoco).
MUJOCO_IDS = {e.id for e in MUJOCO}
#: Registry entries the per-ID tests iterate (all but Craftax's and the MuJoCo ones).
PER_ID: list[EnvEntry] = [
    e for e in REGISTRY if not e.id.startswith("gpuvec/Craftax-") and e.id not in MUJOCO_IDS
]
#: Registry entries of the generic tests, in registry order.
GENERIC: list[EnvEntry] = [e for e in PER_ID if e.id not in MINIGRID_IDS] + _representatives()
GENERIC_IDS: list[str] = [e.id for e in GENERIC]
