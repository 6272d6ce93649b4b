"""Batched, tensor-native RL environments for gymnasium, on GPU or CPU.

Importing the package registers every ``gpuvec/<Name>-v<k>`` ID, so
``gymnasium.make_vec("gpuvec/CartPole-v1", num_envs=4096, device="cuda")`` works. An env of
your own is an :class:`EnvDef`; :func:`check_env_def` tests it against the contract and
:func:`register` registers it with gymnasium.
"""

from gpuvec_envs.autotune import autotune
from gpuvec_envs.check import EnvDefError, Violation, check_env_def
from gpuvec_envs.core import EnvDef, GpuEnv, GpuVecEnv, ObservationView, Rng, ShellState
from gpuvec_envs.custom import register
from gpuvec_envs.registry import REGISTRY, register_all

register_all()

__version__ = "0.1.0"
__all__ = [
    "REGISTRY",
    "EnvDef",
    "EnvDefError",
    "GpuEnv",
    "GpuVecEnv",
    "ObservationView",
    "Rng",
    "ShellState",
    "Violation",
    "__version__",
    "autotune",
    "check_env_def",
    "register",
]
