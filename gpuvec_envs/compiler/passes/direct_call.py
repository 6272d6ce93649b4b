"""A compiled graph called straight into inductor's generated CPU code.

AOT autograd wraps the generated ``call`` in per-call wrappers (grad mode, aliasing and
version-counter bookkeeping; on GPUs, copies of misaligned inputs). For graphs whose inputs
need no grad and whose input mutations happen inside the generated code those wrappers do
nothing, so on the CPU the generated module is called directly (in its lean form,
:mod:`~gpuvec_envs.compiler.passes.lean_wrapper`, where that applies), provided it takes
exactly the inputs and returns the same outputs as the wrapped call on copies of the
example inputs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from gpuvec_envs.compiler.passes.lean_wrapper import lean_wrapper
from gpuvec_envs.compiler.pytree import layout
from gpuvec_envs.compiler.report import PassResult


def direct_call(
    compiled: Callable[..., Any],
    inner: dict[str, Any],
    inputs: list[torch.Tensor],
    n: int,
    *,
    enabled: bool = True,
    lean: bool = True,
) -> tuple[Callable[..., Any], list[PassResult]]:
    """A call of the ``n`` leaves, and the outcomes of the direct-call and lean passes.

    Args:
        compiled: AOT autograd's call; takes the leaves, then the lifted constants
            (``inputs[n:]``).
        inner: ``{"code": inductor's compiled output, "arity": its input count}``.
        inputs: The example leaves followed by the lifted constants.
        n: Number of leaves.
        enabled: Run the direct-call pass.
        lean: Run the lean-wrapper pass (only with ``enabled``).
    """
    constants = inputs[n:]

    def with_constants(*flat: torch.Tensor) -> Any:
        return compiled(*flat, *constants)

    off = [PassResult("direct_call", "off"), PassResult("lean_wrapper", "off")]
    if not enabled:
        return with_constants, off
    lean_off = [PassResult("lean_wrapper", "off" if not lean else "not_needed", "no direct call")]
    if any(t.requires_grad or t.device.type != "cpu" for t in inputs):
        why = "an input requires grad or is not on the CPU"
        return with_constants, [PassResult("direct_call", "not_needed", why), *lean_off]
    code = inner.get("code")
    generated = getattr(code, "current_callable", None)
    if code is None or inner.get("arity") != len(inputs) or generated is None:
        why = "inductor's generated call was not found or takes other inputs"
        return with_constants, [PassResult("direct_call", "failed", why), *lean_off]

    want = compiled(*[t.clone() for t in inputs])
    candidates: list[tuple[Callable[..., Any], PassResult]] = []
    if lean:
        made, detail = lean_wrapper(generated)
        if made is None:
            # an input returned as it is: inductor's call is the right one, not a failure
            status = "not_needed" if detail == "an input is returned as it is" else "failed"
            lean_result = PassResult("lean_wrapper", status, detail)
        else:
            candidates.append((made, PassResult("lean_wrapper", "applied", detail)))
            lean_result = PassResult("lean_wrapper", "failed", "outputs differ from inductor's")
    else:
        lean_result = PassResult("lean_wrapper", "off")
    candidates.append((generated, lean_result))
    for direct, lean_outcome in candidates:
        got = direct([t.clone() for t in inputs])
        if len(want) == len(got) and all(map(_same_tensor, want, got)):

            def call(*flat: torch.Tensor, _direct: Callable[..., Any] = direct) -> Any:
                return _direct([*flat, *constants])

            call.__name__ = "direct_call"
            return call, [PassResult("direct_call", "applied"), lean_outcome]
    why = "the generated call's outputs differ from AOT autograd's"
    return with_constants, [PassResult("direct_call", "failed", why), lean_result]


def _same_tensor(a: Any, b: Any) -> bool:
    return (
        isinstance(a, torch.Tensor)
        and isinstance(b, torch.Tensor)
        and layout(a) == layout(b)
        and a.device == b.device
        and torch.equal(a, b)
    )
