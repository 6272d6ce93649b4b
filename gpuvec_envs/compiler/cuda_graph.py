"""Replay of a compiled CUDA call from a CUDA graph with static input buffers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch


class CudaGraphCall:
    """A flat compiled call replayed from a CUDA graph with static input buffers.

    The graph reads ``static_in`` and writes outputs into the graph's own memory. Each call
    copies only the input leaves that are not already the static buffers (``state_out``
    maps output leaves back onto inputs, so a state fed back from the previous call is
    copied inside the graph and costs no extra launch). Outputs other than the fed-back
    state are cloned, so the caller may keep them past the next call.

    Args:
        flat_call: A function from :func:`~gpuvec_envs.compiler.flat.compile_flat`.
        example_args: Example arguments on a CUDA device.
        state_out: For each output leaf index that is the next value of an input leaf,
            that input leaf's index.
    """

    def __init__(
        self,
        flat_call: Callable[..., Any],
        example_args: tuple[Any, ...],
        state_out: dict[int, int],
    ) -> None:
        self.flatten, self.unflatten = flat_call.flatten, flat_call.unflatten
        compiled = flat_call.flat
        self.static_in = [t.clone() for t in self.flatten(*example_args)]
        self.state_out = dict(state_out)
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(2):  # warm-up outside the graph (allocator, lazy init)
                compiled(*[t.clone() for t in self.static_in])
        torch.cuda.current_stream().wait_stream(stream)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            outs = compiled(*self.static_in)
            for o, i in self.state_out.items():
                if outs[o] is not self.static_in[i]:
                    self.static_in[i].copy_(outs[o])
        self.static_out = list(outs)
        for o, i in self.state_out.items():
            self.static_out[o] = self.static_in[i]  # the state lives in the input buffers

    def __call__(self, *args: Any) -> Any:
        """Copy new inputs into the static buffers, replay, rebuild the outputs."""
        for buf, t in zip(self.static_in, self.flatten(*args), strict=True):
            if t is not buf:
                buf.copy_(t)
        self.graph.replay()
        fed_back = self.state_out
        outs = tuple(t if i in fed_back else t.clone() for i, t in enumerate(self.static_out))
        return self.unflatten(outs)
