"""What a compilation did: the strategy that runs, each pass's outcome, each fallback."""

from __future__ import annotations

import dataclasses
from typing import Literal

from gpuvec_envs.compiler.kernels import Kernel

#: ``applied``: the pass changed the compiled code; ``not_needed``: nothing for it to do
#: (e.g. no C++ block crowded enough); ``off``: switched off; ``failed``: it could not run
#: (a form it does not know, a torch internal that is missing) and the code is inductor's.
PassStatus = Literal["applied", "not_needed", "off", "failed"]


@dataclasses.dataclass(frozen=True)
class PassResult:
    """The outcome of one inductor-output pass on one compiled graph."""

    name: str  # "direct_call", "lean_wrapper", "cpp_schedule", "vec_paths", "wrapping_mul", ...
    status: PassStatus
    detail: str = ""  # why, or what it changed

    def __str__(self) -> str:
        return f"{self.name}: {self.status}" + (f" ({self.detail})" if self.detail else "")


@dataclasses.dataclass(frozen=True)
class Fallback:
    """A strategy that was tried and failed (or did not apply) before the one that runs."""

    strategy: str
    reason: str

    def __str__(self) -> str:
        return f"{self.strategy}: {self.reason}"


@dataclasses.dataclass(frozen=True)
class CompileReport:
    """How one compiled step was built (``env.compile_report``).

    Attributes:
        strategy: Name of the strategy that runs the calls (``"cuda_graph"``,
            ``"in_place_state"``, ``"flat_call"``, ``"torch_compile"`` or ``"eager"``).
        passes: Outcome of each inductor-output pass (empty for ``torch_compile``/``eager``).
        fallbacks: Strategies tried before, each with the reason it was not used. Those
            that did not apply by design (e.g. a CUDA graph on the CPU) are not listed.
        skipped: Strategies that did not apply by design, each with the reason.
        compile_seconds: Wall time of the first call (compilation included), in seconds.
        torch_version: ``torch.__version__`` of the process.
        options: The compiler options in force, as ``name=value`` pairs.
        background: For a compile off the caller's path (the ``background`` backend):
            what warmed inductor's cache first (a child process, its seconds, or why
            none); empty for a compile at the first call.
        eager_calls: Calls that ran eagerly before the compiled call took over.
        kernels: The compiled graph's kernels (:mod:`~gpuvec_envs.compiler.kernels`),
            or None where not known (``torch_compile``, eager).
    """

    strategy: str
    passes: tuple[PassResult, ...]
    fallbacks: tuple[Fallback, ...]
    skipped: tuple[Fallback, ...]
    compile_seconds: float
    torch_version: str
    options: tuple[tuple[str, object], ...]
    background: str = ""
    eager_calls: int = 0
    kernels: tuple[Kernel, ...] | None = None

    @property
    def fast_path(self) -> bool:
        """Whether a guard-free flat call runs (not ``torch.compile`` or eager)."""
        return self.strategy in ("cuda_graph", "in_place_state", "flat_call")

    def pass_status(self, name: str) -> PassStatus | None:
        """Status of the pass ``name``, or None if it was not run at all."""
        for p in self.passes:
            if p.name == name:
                return p.status
        return None

    def __str__(self) -> str:
        lines = [
            f"strategy: {self.strategy} ({self.compile_seconds:.2f} s, torch {self.torch_version})"
        ]
        if self.background:
            lines.append(
                f"  compiled in the background after {self.eager_calls} eager calls "
                f"({self.background})"
            )
        if self.kernels is not None:
            kinds = sorted({k.kind for k in self.kernels})
            sizes = [k.nbytes for k in self.kernels]
            moved = f", {sum(sizes)} B per call" if sizes and None not in sizes else ""
            lines.append(f"  kernels: {len(self.kernels)} {'/'.join(kinds)}{moved}")
        lines += [f"  pass {p}" for p in self.passes]
        lines += [f"  fallback from {f}" for f in self.fallbacks]
        lines += [f"  skipped {f}" for f in self.skipped]
        return "\n".join(lines)
