"""Compile a function for device ``"cuda"`` without a GPU, up to Triton's generated source.

A CUDA compile failure (a lowering error, a fallback) should be seen before a user with a
GPU meets it. :func:`lower` runs :func:`~gpuvec_envs.compiler.flat.compile_flat` on fake
tensors of device ``"cuda"``: ``make_fx`` traces, inductor lowers and schedules the graph
and generates the Triton kernels and the Python wrapper, then the compile stops, before
anything would be compiled or run. It needs a CUDA build of torch and Triton (a CUDA build
runs on a machine without a GPU), and it depends on torch internals, all of them here:

* the device queries inductor makes (``torch.cuda`` and dynamo's device interface) answer
  as an NVIDIA H200 would (:data:`H200`), and Triton gets a driver that only names the
  target (``sm_90``);
* ``make_fx`` evaluates no constant for real (``CONSTANT_NUMEL_LIMIT = 0``), and inductor
  folds none (``joint_graph_constant_folding``), times no padded matrix product
  (``shape_padding``), reads no cached graph and states each Triton kernel's bytes
  (``benchmark_kernel``);
* ``GraphLowering.codegen`` (or ``.run``, to stop after lowering) raises once its work is
  done, with the source.

Everything is restored on exit. :func:`unavailable` says why it cannot run here, if so.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
import types
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch.utils import _pytree as pytree

from gpuvec_envs.compiler.flat import StopCompile, carried, patched
from gpuvec_envs.compiler.kernels import Kernel, kernels_in
from gpuvec_envs.compiler.options import CompilerOptions

#: What the device queries answer (an NVIDIA H200, compute capability 9.0).
H200 = types.SimpleNamespace(
    name="NVIDIA H200 (fake)",
    major=9,
    minor=0,
    multi_processor_count=132,
    total_memory=150_000_000_000,
    warp_size=32,
    max_threads_per_multi_processor=2048,
    max_threads_per_block=1024,
    regs_per_multiprocessor=65536,
    shared_memory_per_block_optin=232448,
    shared_memory_per_multiprocessor=233472,
    shared_memory_per_block=49152,
    L2_cache_size=50_331_648,
    gcnArchName="",
    is_integrated=False,
    uuid="fake",
    clock_rate=1980000,
    memory_clock_rate=3201000,
    memory_bus_width=6144,
)


@dataclasses.dataclass(frozen=True)
class Lowering:
    """What :func:`lower` produced.

    Attributes:
        kernels: The Triton kernels of the generated source (empty after lowering only).
        source: The generated Python wrapper with its kernels ("" after lowering only).
        buffers: Buffers inductor's lowering made.
        seconds: Wall time of the trace and compile.
    """

    kernels: tuple[Kernel, ...]
    source: str
    buffers: int
    seconds: float

    def bytes_per_call(self) -> int | None:
        """Bytes all kernels read and write per call, if the source states each kernel's."""
        sizes = [k.nbytes for k in self.kernels]
        return None if not sizes or None in sizes else sum(sizes)  # type: ignore[arg-type]


class _Done(StopCompile):
    """Raised by the patched inductor stage once its work is done."""

    def __init__(self, source: str, buffers: int) -> None:
        super().__init__("stopped")
        self.source, self.buffers = source, buffers


def unavailable() -> str | None:
    """Why :func:`lower` cannot run with this torch, or None if it can."""
    if torch.version.cuda is None:
        return f"torch {torch.__version__} is not a CUDA build"
    try:
        import triton  # noqa: F401
        from triton.backends.compiler import GPUTarget  # noqa: F401
    except ImportError as exc:
        return f"Triton is missing ({exc})"
    return None


def _fake_triton_driver() -> Any:
    """A Triton driver that names an sm_90 CUDA target and nothing else."""
    from triton.backends.compiler import GPUTarget

    class FakeDriver:
        def get_current_target(self) -> GPUTarget:
            return GPUTarget("cuda", 90, 32)

        def get_current_device(self) -> int:
            return 0

        def __getattr__(self, name: str) -> Any:
            raise AttributeError(f"the fake Triton driver has no {name}")

    return FakeDriver()


@contextlib.contextmanager
def fake_gpu(stop_after: str = "codegen") -> Iterator[None]:
    """Inside: inductor compiles for an H200 without one, and stops after ``stop_after``.

    ``stop_after`` is ``"codegen"`` (the Triton source exists) or ``"lowering"``.

    Raises:
        RuntimeError: :func:`unavailable` gives a reason.
    """
    why = unavailable()
    if why is not None:
        raise RuntimeError(f"cannot compile for CUDA without a GPU here: {why}")
    import torch._inductor.scheduler as scheduler
    import torch.fx.experimental.proxy_tensor as proxy_tensor
    import torch.utils._triton as torch_triton
    from torch._dynamo import device_interface
    from torch._inductor.graph import GraphLowering
    from triton.runtime import driver

    cuda_if = device_interface.CudaInterface

    def props(device: Any = None) -> Any:
        return H200

    def stop_run(self: Any, *args: Any) -> Any:
        run(self, *args)
        raise _Done("", len(self.buffers))

    def stop_codegen(self: Any) -> Any:
        out = codegen(self)
        first = out[0] if isinstance(out, tuple) else out
        raise _Done(getattr(first, "value", str(first)), len(self.buffers))

    run, codegen = GraphLowering.run, GraphLowering.codegen
    patches = [
        (torch.cuda, "get_device_properties", props),
        (torch.cuda, "get_device_capability", lambda device=None: (9, 0)),
        (torch.cuda, "device_count", lambda: 1),
        (torch.cuda, "current_device", lambda: 0),
        (cuda_if, "get_device_properties", staticmethod(props)),
        (cuda_if, "current_device", staticmethod(lambda: 0)),
        (cuda_if, "device_count", staticmethod(lambda: 1)),
        (cuda_if, "is_available", staticmethod(lambda: True)),
        (torch_triton, "has_triton", lambda: True),
        (scheduler, "has_triton", lambda: True),
        (driver, "_active", _fake_triton_driver()),
        (proxy_tensor, "CONSTANT_NUMEL_LIMIT", 0),
    ]
    if stop_after == "lowering":
        patches.append((GraphLowering, "run", stop_run))
    elif stop_after == "codegen":
        patches.append((GraphLowering, "codegen", stop_codegen))
    else:
        raise ValueError(f"stop_after must be 'codegen' or 'lowering', got {stop_after!r}")
    config = {
        "joint_graph_constant_folding": False,
        "fx_graph_cache": False,
        "benchmark_kernel": True,
        "shape_padding": False,  # pads matrix products by timing them on the device
        "compile_threads": 1,  # nothing to compile: no worker pool
    }
    with contextlib.ExitStack() as stack:
        for target, name, value in patches:
            stack.enter_context(patched(target, name, value))
        stack.enter_context(torch._inductor.config.patch(config))
        yield


def _done_in(exc: BaseException) -> _Done | None:
    """The :class:`_Done` an exception carries (inductor wraps errors of its stages)."""
    return carried(exc, _Done)


def fake_like(tree: Any, fake_mode: Any, device: str = "cuda") -> Any:
    """``tree`` with every tensor replaced by a fake one of its layout on ``device``."""

    def fake(t: Any) -> Any:
        if not isinstance(t, torch.Tensor):
            return t
        with fake_mode:
            return torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device=device)

    return pytree.tree_map(fake, tree)


def lower(
    fn: Callable[..., Any],
    example_args: tuple[Any, ...],
    *,
    stop_after: str = "codegen",
    compiler: CompilerOptions | None = None,
    options: dict[str, Any] | None = None,
) -> Lowering:
    """Compile ``fn`` as :func:`~gpuvec_envs.compiler.flat.compile_flat` would on CUDA.

    Args:
        fn: The pure function.
        example_args: Example arguments of any device (only their structure, shapes,
            strides and dtypes are used: each tensor becomes a fake CUDA tensor).
        stop_after: ``"codegen"`` (default) or ``"lowering"``.
        compiler: Compiler switches, as for ``compile_flat``.
        options: Inductor config values, as for ``compile_flat``.

    Raises:
        RuntimeError: no CUDA build or no Triton (:func:`unavailable`).
        Exception: whatever tracing, lowering or code generation raise: the CUDA failure.
    """
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    from gpuvec_envs.compiler.flat import compile_flat

    start = time.perf_counter()
    fake_mode = FakeTensorMode(shape_env=ShapeEnv(), static_shapes=True)
    args = fake_like(example_args, fake_mode)
    with fake_gpu(stop_after), torch.no_grad():
        try:
            compile_flat(fn, args, options=options, compiler=compiler)
        except Exception as exc:  # noqa: BLE001 - the signal of a finished stage, or a failure
            done = _done_in(exc)
            if done is None:
                raise
        else:  # pragma: no cover - the patched stage always raises
            raise RuntimeError("the compile did not stop at the fake GPU's stage")
    kernels = kernels_in(done.source) if done.source else ()
    return Lowering(kernels, done.source, done.buffers, time.perf_counter() - start)


def lower_step(env: Any, **kwargs: Any) -> Lowering:
    """:func:`lower` of a :class:`~gpuvec_envs.core.vector.GpuVecEnv`'s step on CUDA.

    ``env`` is reset, on any device; its step (as ``step()`` runs it) is lowered for its
    batch size, state and action layout (its step :class:`~gpuvec_envs.compiler.Backend`'s
    uncompiled function).
    """
    args = (env.state, env._example_action())
    return lower(env._step.function, args, compiler=env.compiler_options, **kwargs)
