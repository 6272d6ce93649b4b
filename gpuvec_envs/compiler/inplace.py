"""A compiled state-first call that writes the new state into the state's own tensors."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gpuvec_envs.compiler.flat import compile_flat
from gpuvec_envs.compiler.options import CompilerOptions
from gpuvec_envs.compiler.pytree import is_namedtuple, layout, make_flattener, make_unflattener


class InPlaceStateCall:
    """A flat compiled call of a state-first function that updates the state in place.

    ``fn(state, *rest) -> (new_state, *outputs)`` (a tuple or NamedTuple whose first field
    is the new state, of the same structure, shapes, dtypes and strides as ``state``) is
    compiled with the new state written into the state's own tensors: inductor's kernel
    stores it there instead of into fresh output buffers, which saves an allocation per
    state leaf and keeps the state's memory warm. The call owns those buffers: the first
    call clones the given state into them, later calls copy only the leaves that are not
    already its buffers (a state fed back from the previous call costs nothing), and the
    returned state *is* the buffers (:attr:`state`, the same object every call),
    overwritten by the next call.

    Args:
        fn: The state-first pure function.
        example_args: Example ``(state, *rest)``.
        options: Inductor config values set while compiling.
        compiler: Pass switches (see :func:`~gpuvec_envs.compiler.flat.compile_flat`).

    Raises:
        ValueError: the new state's leaves do not match the state's (shape, dtype, strides).
        Exception: whatever tracing or inductor raise.
    """

    def __init__(
        self,
        fn: Callable[..., Any],
        example_args: tuple[Any, ...],
        options: dict[str, Any] | None = None,
        compiler: CompilerOptions | None = None,
    ) -> None:
        def inplace(state: Any, *rest: Any) -> Any:
            out = fn(state, *rest)
            new = make_flattener(out[:1])(out[0])
            for buf, value in zip(self.flatten_state(state), new, strict=True):
                if layout(buf) != layout(value):
                    raise ValueError("the new state's layout differs from the state's")
                buf.copy_(value)
            return type(out)(None, *out[1:]) if is_namedtuple(out) else (None, *out[1:])

        self.flatten_state = make_flattener(example_args[:1])
        self.unflatten_state = make_unflattener(example_args[0])
        self.buffers = tuple(t.clone() for t in self.flatten_state(example_args[0]))
        #: The state made of the buffers: what every call returns.
        self.state = self.unflatten_state(self.buffers)
        # the state buffers are the call's inputs: a call compiled for another instance of
        # the same ``fn`` (dynamic_batch) serves this one
        call = compile_flat(
            inplace,
            (self.state, *example_args[1:]),
            False,
            options,
            compiler=compiler,
            memo_as=("in_place", fn),
        )
        self._namedtuple: bool | None = None  # whether fn returns a NamedTuple (first call)
        self._flatten_rest = make_flattener(example_args[1:])
        self._flat, self._unflatten = call.flat, call.unflatten
        #: The outcome of each pass (see :func:`~gpuvec_envs.compiler.flat.compile_flat`).
        self.passes = call.passes
        #: The compiled graph's kernels (see :mod:`~gpuvec_envs.compiler.kernels`).
        self.kernels = call.kernels

    def __call__(self, state: Any, *rest: Any) -> Any:
        """Copy a foreign state into the buffers, step them in place, return the outputs."""
        if state is not self.state:
            for buf, t in zip(self.buffers, self.flatten_state(state), strict=True):
                if t is not buf:
                    buf.copy_(t)
        out = self._unflatten(self._flat(*self.buffers, *self._flatten_rest(*rest)))
        if self._namedtuple is None:
            self._namedtuple = is_namedtuple(out)
        return type(out)(self.state, *out[1:]) if self._namedtuple else (self.state, *out[1:])
