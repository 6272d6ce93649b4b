"""ATen's own kernels for the float operations that inductor computes differently from eager.

A compiled step must compute the bits the eager step computes: the ``auto`` backend
switches from eager to compiled calls when a compile lands, and a trajectory must not
depend on when that is. Inductor's code equals eager ATen's for IEEE-rounded arithmetic
(``+ - * /``, ``floor``, ``round``, ``fmod``, ``where``, integer operations; its C++ is
built with ``-ffp-contract=off``), but not for the transcendental functions: its C++
calls SLEEF through ``at::vec`` in vector loops and libm in scalar ones, where ATen's eager
kernels call their own (torch 2.13, AVX-512, float32: ``sin`` differs from eager in the
last bit for 25 % of inputs, ``cos`` 29 %, ``exp`` 9 %; float64 1-6 %). Triton (CUDA)
calls libdevice or approximate instructions.

While :func:`eager_kernels` is active, inductor lowers each operation of :data:`OPS` to a
call of ATen's kernel (a fallback, as inductor does for operations it has no code for):
the same bits as eager, at the cost of a kernel boundary (the operation's input and output
go through memory, and it is not fused with its neighbours). The library's own envs need
none: they compute ``sin``/``cos`` from exactly rounded arithmetic
(:mod:`gpuvec_envs.envs.classic._trig`), which fuses. Inductor's FX graph cache key does not
see lowerings; a no-op post-grad pass whose ``uuid`` names the ops keeps the cached code
of builds with and without them apart.

Operations that no fallback makes equal are reported by :func:`inexact_ops`: floating
reductions (inductor and ATen sum in different orders) and operations that inductor
decomposes before lowering (``softmax``, ``log_softmax``, ...).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator

import torch

from gpuvec_envs.compiler.report import PassResult

#: The pass's name in ``compile_report`` and its switch (``CompilerOptions.eager_math``).
NAME = "eager_math"
#: What a pass result says where the compiled bits may differ.
DIFFERS = "compiled float results may differ from eager ones in the last bit"


def exact(passes: tuple[PassResult, ...] | list[PassResult]) -> bool:
    """Whether a compiled graph with these pass results computes eager's bits.

    True when its ``eager_math`` result is ``applied`` or ``not_needed`` (or absent: a
    call that no pass saw, e.g. the eager strategy's).
    """
    return all(p.status in ("applied", "not_needed") for p in passes if p.name == NAME)


_aten = torch.ops.aten

#: Pointwise float operations whose inductor code differs from ATen's eager kernels.
OPS: tuple[torch._ops.OpOverloadPacket, ...] = (
    _aten.sin,
    _aten.cos,
    _aten.tan,
    _aten.asin,
    _aten.acos,
    _aten.atan,
    _aten.sinh,
    _aten.cosh,
    _aten.tanh,
    _aten.asinh,
    _aten.acosh,
    _aten.atanh,
    _aten.exp,
    _aten.exp2,
    _aten.expm1,
    _aten.log,
    _aten.log2,
    _aten.log10,
    _aten.log1p,
    _aten.sigmoid,
    _aten.erf,
    _aten.erfc,
    _aten.erfinv,
    _aten.sqrt,  # eager's vectorised CPU sqrt is not correctly rounded; inductor's is
    _aten.rsqrt,
    _aten.lgamma,
    _aten.digamma,
)

#: Float operations that stay unequal: reductions (another summation order) and those that
#: inductor decomposes before lowering (their parts then differ from ATen's fused kernel).
UNFIXED: tuple[torch._ops.OpOverloadPacket, ...] = (
    _aten.sum,
    _aten.mean,
    _aten.prod,
    _aten.var,
    _aten.std,
    _aten.var_mean,
    _aten.cumsum,
    _aten.cumprod,
    _aten.logsumexp,
    _aten.linalg_vector_norm,
    _aten._softmax,
    _aten._log_softmax,
    _aten.softplus,
    _aten.gelu,
    _aten.silu,
    _aten.mish,
    _aten.pow,
)

#: Version of this pass, part of the cache key (bump when the lowering changes).
VERSION = 2


@dataclasses.dataclass
class EagerMathLog:
    """What one compilation found and did.

    Attributes:
        routable: The graph's float operations in :data:`OPS`.
        unfixed: The graph's float operations in :data:`UNFIXED`.
        routed: Lowerings routed to ATen, by operation.
        why_not: Why the lowerings could not be patched (None if they were, or not tried).
    """

    routable: list[str] = dataclasses.field(default_factory=list)
    unfixed: list[str] = dataclasses.field(default_factory=list)
    routed: dict[str, int] = dataclasses.field(default_factory=dict)
    why_not: str | None = None
    cuda: bool = False  # a CUDA graph: CUDA_CONFIG set, divisions by numbers rewritten
    divisions: int = 0
    missing: list[str] = dataclasses.field(default_factory=list)
    #: Inductor's FX graph cache served the code (built with these lowerings: the cache
    #: key has them), so nothing was lowered and :attr:`routed` stays empty.
    cached: bool = False

    def result(self, on: bool) -> PassResult:
        """The ``eager_math`` pass's outcome (:func:`exact` reads it)."""
        ops = ", ".join(self.routable + self.unfixed)
        if not on:
            if not ops:
                return PassResult(NAME, "off", "CUDA: Triton's own division and fusion")
            return PassResult(NAME, "off", f"inductor's own code for {ops}: {DIFFERS}")
        if self.why_not is not None:
            return PassResult(NAME, "failed", f"{self.why_not}; {ops}: {DIFFERS}")
        if self.missing:
            why = f"this inductor has no {', '.join(self.missing)}: {DIFFERS}"
            return PassResult(NAME, "failed", why)
        if self.unfixed:
            why = f"no ATen kernel equals {', '.join(self.unfixed)}: {DIFFERS}"
            return PassResult(NAME, "failed", why)
        done = []
        if self.cuda:
            done.append(
                f"Triton: IEEE division, no fused multiply-add; {self.divisions} "
                "divisions by a number as eager's reciprocal products"
            )
        if self.routed:
            counts = ", ".join(f"{k} x{v}" for k, v in self.routed.items())
            done.append(f"ATen's kernels, not fused: {counts}")
        elif self.routable and self.cached:
            ops = ", ".join(self.routable)
            done.append(f"ATen's kernels, not fused: {ops} (inductor's cached code)")
        elif self.routable:  # lowered, but not through the patched lowerings
            ops = ", ".join(self.routable)
            return PassResult(NAME, "failed", f"{ops} not routed to ATen: {DIFFERS}")
        if not done:
            why = "no float operation that inductor computes differently from eager"
            return PassResult(NAME, "not_needed", why)
        return PassResult(NAME, "applied", "; ".join(done))


def _is_float(node: torch.fx.Node) -> bool:
    val = node.meta.get("val")
    return isinstance(val, torch.Tensor) and val.is_floating_point()


def _packet(node: torch.fx.Node) -> object:
    return getattr(node.target, "overloadpacket", None)


def graph_ops(gm: torch.fx.GraphModule) -> tuple[list[str], list[str]]:
    """Names of ``gm``'s float operations: ``(in OPS, in UNFIXED)``.

    Also inside ``scan`` bodies; each name once, in graph order.
    """
    routable: list[str] = []
    unfixed: list[str] = []
    for mod in gm.modules():
        if not isinstance(mod, torch.fx.GraphModule):
            continue
        for node in mod.graph.nodes:
            if node.op != "call_function" or not _is_float(node):
                continue
            packet = _packet(node)
            if packet is _aten.pow and _integer_power(node):
                continue
            if packet is _aten.sum and _zero_or_nan(node.args[0]):
                continue
            name = str(node.target)
            if packet in OPS and name not in routable:
                routable.append(name)
            elif packet in UNFIXED and name not in unfixed:
                unfixed.append(name)
    return routable, unfixed


#: Operations that keep "every element is 0 or NaN" (and keep a sum of such order-free).
_KEEPS_ZERO = {
    _aten.sum,
    _aten.add,
    _aten.view,
    _aten.reshape,
    _aten._unsafe_view,
    _aten._to_copy,
    _aten.clone,
    _aten.expand,
    _aten.select,
    _aten.slice,
}


def _zero_or_nan(arg: object, depth: int = 0) -> bool:
    """Whether every element of ``arg`` is +-0 or NaN by construction.

    ``x * 0``, and sums of such: their sum is the same in any order (the finite probe's,
    :mod:`gpuvec_envs.core.finite`).
    """
    if not isinstance(arg, torch.fx.Node) or arg.op != "call_function" or depth > 32:
        return False
    packet = _packet(arg)
    if packet is _aten.mul:
        return any(isinstance(a, (int, float)) and a == 0 for a in arg.args)
    if packet in _KEEPS_ZERO:
        tensors = [a for a in arg.args if isinstance(a, torch.fx.Node)]
        return bool(tensors) and all(_zero_or_nan(a, depth + 1) for a in tensors)
    return False


def _integer_power(node: torch.fx.Node) -> bool:
    """``x ** k`` with a small integer ``k``: inductor and ATen both multiply."""
    exponent = node.args[1] if len(node.args) > 1 else None
    return isinstance(exponent, (int, float)) and float(exponent) in (0.0, 1.0, 2.0, 3.0)


def inexact_ops(gm: torch.fx.GraphModule, routed: bool) -> list[str]:
    """The float operations of ``gm`` whose compiled bits may differ from eager ones.

    Args:
        gm: The traced graph.
        routed: Whether :data:`OPS` run as ATen's kernels (:func:`eager_kernels`).
    """
    routable, unfixed = graph_ops(gm)
    return unfixed if routed else routable + unfixed


class _CacheKeyPass:
    """A post-grad pass that does nothing; its ``uuid`` separates cache entries."""

    def __init__(self, key: str) -> None:
        self.key = key

    def __call__(self, graph: torch.fx.Graph) -> None:
        pass

    def uuid(self) -> str:
        return self.key


@contextlib.contextmanager
def eager_kernels(log: EagerMathLog) -> Iterator[str | None]:
    """While active, inductor lowers :data:`OPS` to ATen kernel calls (process-wide).

    Yields None when installed, else why not (a torch without the lowering table or the
    custom-pass cache key); restores everything on exit. Callers serialise entries.
    """
    try:
        from torch._inductor import config, lowering
        from torch._inductor.custom_graph_pass import CustomGraphPass
    except ImportError as exc:
        yield f"torch has no inductor lowering table ({exc})"
        return
    table = getattr(lowering, "lowerings", None)
    handler = getattr(lowering, "fallback_handler", None)
    realized = getattr(lowering, "needs_realized_inputs", None)
    if not isinstance(table, dict) or handler is None or realized is None:
        yield "torch._inductor.lowering has no lowerings/fallback_handler/needs_realized_inputs"
        return
    if config.post_grad_custom_post_pass is not None:
        yield "inductor's post_grad_custom_post_pass is already set"
        return
    overloads = [
        getattr(packet, name) for packet in OPS for name in packet.overloads() if name != "out"
    ]
    saved = {op: table.get(op) for op in overloads}
    added = [op for op in overloads if op not in realized]

    def routed(op: torch._ops.OpOverload):  # noqa: ANN202
        fallback = handler(op, add_to_fallback_set=False)

        def lower(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
            log.routed[str(op)] = log.routed.get(str(op), 0) + 1
            return fallback(*args, **kwargs)

        lower._is_fallback_handler = True  # type: ignore[attr-defined]
        return lower

    names = ",".join(sorted(str(p) for p in OPS))
    key_pass = type("GpuvecEagerMath", (_CacheKeyPass, CustomGraphPass), {})(
        f"gpuvec-eager-math-{VERSION}:{names}"
    )
    try:
        for op in overloads:
            table[op] = routed(op)
        for op in added:
            realized.add(op)
        log.hooked = True
        with config.patch(post_grad_custom_post_pass=key_pass):
            yield None
    finally:
        for op, old in saved.items():
            if old is None:
                table.pop(op, None)
            else:
                table[op] = old
        for op in added:
            realized.discard(op)


#: Inductor settings of CUDA graphs under ``eager_math``: Triton's ``x / y`` is an
#: approximate division unless ``division_rounding`` (eager: IEEE), and Triton fuses
#: ``a * b + c`` into one rounding unless ``emulate_precision_casts`` turns its
#: ``enable_fp_fusion`` off (eager rounds each operation, one kernel each).
CUDA_CONFIG = {"eager_numerics.division_rounding": True, "emulate_precision_casts": True}


def cuda_config() -> tuple[dict[str, bool], list[str]]:
    """:data:`CUDA_CONFIG`'s entries that this inductor has, and the names it lacks."""
    from torch._inductor import config

    have, missing = {}, []
    for name, value in CUDA_CONFIG.items():
        obj, *rest = name.split(".")
        holder = getattr(config, obj, None) if rest else config
        if holder is not None and hasattr(holder, rest[0] if rest else name):
            have[name] = value
        else:
            missing.append(name)
    return have, missing


def eager_reciprocals(gm: torch.fx.GraphModule) -> int:
    """Divisions of CUDA float tensors by a number as eager CUDA computes them; how many.

    ATen's CUDA kernel multiplies by the reciprocal computed in the tensor's math type
    (``float(1) / float(b)`` for float32); inductor multiplies by ``1 / b`` computed in
    Python's double, then rounded: e.g. for ``b = 1.1`` the float32 constants differ in
    the last bit. Each ``aten.div.Tensor(x, b)`` of a CUDA graph becomes
    ``aten.mul.Tensor(x, r)`` with eager's ``r``.
    """
    import numpy as np

    math_types = {torch.float64: np.float64, torch.float32: np.float32}
    changed = 0
    for node in list(gm.graph.nodes):
        if node.op != "call_function" or node.target is not _aten.div.Tensor:
            continue
        if len(node.args) != 2 or node.kwargs:
            continue
        x, b = node.args
        val = x.meta.get("val") if isinstance(x, torch.fx.Node) else None
        if (
            not isinstance(b, (int, float))
            or isinstance(b, bool)
            or not isinstance(val, torch.Tensor)
        ):
            continue
        if val.device.type != "cuda" or not val.is_floating_point():
            continue
        kind = math_types.get(val.dtype, np.float32)  # half, bfloat16: float32 math
        with np.errstate(divide="ignore"):
            r = float(kind(1.0) / kind(b))
        node.target = _aten.mul.Tensor
        node.args = (x, r)
        changed += 1
    if changed:
        gm.recompile()
    return changed
