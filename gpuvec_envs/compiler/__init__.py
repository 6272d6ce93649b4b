"""The compiler layer: strategies, inductor-output passes, switches and compile reports.

Nothing here knows about environments: it compiles pure functions of pytrees of tensors
(:func:`compile_flat`) and runs them through the first strategy that works
(:class:`Backend`), reporting what it did (:class:`CompileReport`). See docs/compiler.md.
"""

from gpuvec_envs.compiler.backend import BACKENDS, Backend, CompileError, run_within
from gpuvec_envs.compiler.cuda_graph import CudaGraphCall
from gpuvec_envs.compiler.flat import COMPILE_LOCK, compile_flat
from gpuvec_envs.compiler.inplace import InPlaceStateCall
from gpuvec_envs.compiler.options import ENV_VAR, CompilerOptions, resolve
from gpuvec_envs.compiler.pytree import make_flattener, make_unflattener
from gpuvec_envs.compiler.report import CompileReport, Fallback, PassResult
from gpuvec_envs.compiler.strategies import STRATEGIES, NoFallback

__all__ = [
    "BACKENDS",
    "COMPILE_LOCK",
    "ENV_VAR",
    "STRATEGIES",
    "Backend",
    "CompileError",
    "CompileReport",
    "CompilerOptions",
    "CudaGraphCall",
    "Fallback",
    "InPlaceStateCall",
    "NoFallback",
    "PassResult",
    "compile_flat",
    "make_flattener",
    "make_unflattener",
    "resolve",
    "run_within",
]
