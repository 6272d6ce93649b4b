"""The engine: env contract, counter-based RNG, the vector-env shell and its backends."""

from gpuvec_envs.core.env import EnvDef, ObservationView
from gpuvec_envs.core.rng import Rng
from gpuvec_envs.core.single import GpuEnv
from gpuvec_envs.core.step import ShellState
from gpuvec_envs.core.vector import GpuVecEnv

__all__ = ["EnvDef", "GpuEnv", "GpuVecEnv", "ObservationView", "Rng", "ShellState"]
