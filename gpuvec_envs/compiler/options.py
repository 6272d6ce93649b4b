"""Compiler switches: one per strategy and per pass, from keywords or ``GPUVEC_COMPILER``.

``GPUVEC_COMPILER="lean_wrapper=0,cpp_schedule=0"`` sets boolean switches process-wide;
``compiler_options={"cpp_schedule": False}`` on an env (or a :class:`CompilerOptions`)
sets them for that env. Precedence, lowest first: the defaults, the environment variable,
the env's registry entry, the ``compiler_options`` keyword. Every combination gives the
same results (but ``eager_math=False`` where a step has transcendental functions: last
bits); switching a pass off only makes the step slower.
"""

from __future__ import annotations

import dataclasses
import os
import types
from collections.abc import Mapping
from typing import Any

ENV_VAR = "GPUVEC_COMPILER"
#: ``max_fusion_size`` under ``wide_fusion``: more operations than any step has (odd, so
#: that inductor's cache keys of these builds differ from any built without the distance
#: rule lifted, which the cache key does not see).
WIDE_FUSION = (1 << 16) + 1
_TRUE, _FALSE = ("1", "true", "on", "yes"), ("0", "false", "off", "no")


@dataclasses.dataclass(frozen=True)
class CompilerOptions:
    """Switches of the compiled backend (all on by default, but ``dynamic_batch`` and ``strict``).

    Attributes:
        flat_call: Compile into a guard-free flat call (off: ``torch.compile`` runs it).
        in_place: Write a step's new state into the state's own buffers.
        cuda_graph: Replay a CUDA step from a CUDA graph.
        direct_call: Call inductor's generated CPU code without AOT autograd's wrappers.
        lean_wrapper: Keep the generated CPU wrapper's scratch buffers between calls
            (needs ``direct_call``).
        cpp_schedule: Reorder the loads and stores of crowded C++ loop bodies.
        vec_paths: Replace ATen vector calls that are slow in AVX2 code (counted
            whole-vector loads, int32 -> uint8 conversions, integer ``arange``) and bool
            mask loads, stores and byte conversions (slow on AVX-512).
        wrapping_mul: On the CPU, trace the RNG's 32-bit products as one wrapping int32
            multiply each and build the kernels with ``-fwrapv`` (off: three 16-bit
            products that never overflow; the same bits).
        isa_probe: On the CPU, let inductor probe only the vector ISA it will pick
            instead of every one the CPU has (a g++ build each on a cold cache, ~1.7 s;
            :mod:`~gpuvec_envs.compiler.passes.isa_probe`); the same ISA is picked.
        retain_memory: Keep freed host memory in the process (glibc ``mallopt``), so fresh
            CPU step outputs do not page-fault; process-wide, set by the first CPU env.
        warm_start: At the first call of the ``auto``/``background`` backend, build at
            once (seconds) a call that an earlier process compiled into inductor's cache,
            instead of stepping eagerly while a child process re-derives it
            (:mod:`~gpuvec_envs.compiler.warm`).
        yield_to_compile: While an env's step compiles in a child process, on a machine
            with at most :data:`~gpuvec_envs.compiler.backend.YIELD_MAX_CPUS` CPUs, pause
            after each of its eager steps for as long as the step ran, so that the
            compiled step arrives sooner.
        wide_fusion: Let inductor fuse any number of operations into one kernel
            (``max_fusion_size`` :data:`WIDE_FUSION` instead of inductor's 64), and fuse
            operations however far apart in its schedule (inductor refuses beyond 64,
            against peak memory, which a step's few small buffers do not reach), so that a
            frame-skipped step is one loop over the batch, not one kernel per few frames
            (an ``inductor`` mapping that sets ``max_fusion_size`` wins, and keeps both).
        dynamic_batch: Trace the batch dimension as a symbol, so that one compiled step
            serves every ``num_envs`` (an env of another size compiles from inductor's
            cache in seconds instead of anew); off by default: the kernels of a fixed size
            are faster on the CPU (see docs/performance.md).
        eager_math: Compile the float operations whose inductor code differs from eager
            ATen's in the last bit (``sin``, ``exp``, ``tanh``, ...; none in this library's
            envs) as calls of ATen's kernels, so that compiled steps equal eager ones
            bitwise (:mod:`~gpuvec_envs.compiler.passes.eager_math`); off: inductor's own
            fused code, faster, and the ``auto`` backend then keeps such a step eager
            rather than switch mid-run (``backend="compile"`` runs it compiled throughout).
        strict: Raise :class:`~gpuvec_envs.compiler.backend.CompileError` where a
            strategy (or a background compile) fails, instead of falling back to a slower
            one with a warning (off by default).
        inductor: ``torch._inductor.config`` values set while compiling (not settable
            from the environment variable).
    """

    flat_call: bool = True
    in_place: bool = True
    cuda_graph: bool = True
    direct_call: bool = True
    lean_wrapper: bool = True
    cpp_schedule: bool = True
    vec_paths: bool = True
    wrapping_mul: bool = True
    isa_probe: bool = True
    retain_memory: bool = True
    warm_start: bool = True
    yield_to_compile: bool = True
    wide_fusion: bool = True
    dynamic_batch: bool = False
    eager_math: bool = True
    strict: bool = False
    inductor: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name == "inductor":
                if not isinstance(value, Mapping):
                    raise TypeError(f"inductor must be a mapping, got {type(value).__name__}")
                object.__setattr__(self, "inductor", types.MappingProxyType(dict(value)))
            elif not isinstance(value, bool):
                raise TypeError(f"compiler option {f.name} must be a bool, got {value!r}")

    @classmethod
    def no_passes(cls) -> CompilerOptions:
        """Every inductor-output pass and ``wide_fusion`` off (the strategies stay on)."""
        return cls(
            wide_fusion=False,
            direct_call=False,
            lean_wrapper=False,
            cpp_schedule=False,
            vec_paths=False,
            wrapping_mul=False,
            isa_probe=False,
        )

    def inductor_config(self) -> dict[str, Any]:
        """The ``torch._inductor.config`` values to compile with (``inductor`` wins)."""
        wide = {"max_fusion_size": WIDE_FUSION} if self.wide_fusion else {}
        return {**wide, **self.inductor}

    def replace(self, overrides: Mapping[str, Any]) -> CompilerOptions:
        """A copy with ``overrides`` applied.

        Raises:
            TypeError: on an unknown name or a value of the wrong type.
        """
        names = {f.name for f in dataclasses.fields(self)}
        unknown = sorted(set(overrides) - names)
        if unknown:
            raise TypeError(f"unknown compiler option(s) {unknown}; known: {sorted(names)}")
        return dataclasses.replace(self, **overrides)

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickle and deepcopy by value (``inductor`` is a read-only mapping proxy)."""
        return (_from_items, (self.items(),))

    def items(self) -> tuple[tuple[str, Any], ...]:
        """``(name, value)`` pairs, ``inductor`` as a plain dict."""
        return tuple(
            (f.name, dict(v) if isinstance(v := getattr(self, f.name), Mapping) else v)
            for f in dataclasses.fields(self)
        )


def _from_items(items: tuple[tuple[str, Any], ...]) -> CompilerOptions:
    """A :class:`CompilerOptions` from its :meth:`~CompilerOptions.items`."""
    return CompilerOptions(**dict(items))


def from_env(value: str | None = None) -> dict[str, bool]:
    """The switches set by ``GPUVEC_COMPILER`` (or by ``value``), as overrides.

    Raises:
        ValueError: on a malformed entry, an unknown name or a value that is not 0/1.
    """
    text = os.environ.get(ENV_VAR, "") if value is None else value
    names = {f.name for f in dataclasses.fields(CompilerOptions)} - {"inductor"}
    out: dict[str, bool] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, sep, flag = (s.strip() for s in item.partition("="))
        if not sep or name not in names or flag.lower() not in _TRUE + _FALSE:
            raise ValueError(
                f"{ENV_VAR}: bad entry {item!r}; expected NAME=0 or NAME=1 with NAME in "
                f"{sorted(names)}"
            )
        out[name] = flag.lower() in _TRUE
    return out


def resolve(*layers: CompilerOptions | Mapping[str, Any] | None) -> CompilerOptions:
    """Defaults, then ``GPUVEC_COMPILER``, then each layer in turn (later wins).

    A :class:`CompilerOptions` layer replaces everything below it; a mapping overrides
    the names it holds.

    Raises:
        TypeError: a layer of another type, an unknown name or a non-bool switch.
        ValueError: a malformed ``GPUVEC_COMPILER``.
    """
    options = CompilerOptions().replace(from_env())
    for layer in layers:
        if layer is None:
            continue
        if isinstance(layer, CompilerOptions):
            options = layer
        elif isinstance(layer, Mapping):
            options = options.replace(layer)
        else:
            raise TypeError(
                f"compiler_options must be a dict or a CompilerOptions, got {type(layer).__name__}"
            )
    return options
