"""Assertions on ``env.compile_report`` shared by the compiled parity tests."""

from __future__ import annotations

from typing import Any

import torch

from gpuvec_envs.compiler import CompileReport
from gpuvec_envs.registry import REGISTRY

#: The torch release whose pass outcomes are pinned exactly (constraints.txt).
PINNED = torch.__version__.startswith("2.13.")


def registered_compiler_options(env_def: Any) -> dict[str, Any]:
    """The compiler options of the registry entry of ``env_def``'s class."""
    name = f"{type(env_def).__module__}:{type(env_def).__name__}"
    options = [e.compiler for e in REGISTRY if e.env_def == name]
    assert options, f"{name} is not registered"
    return options[0]


def expected_lean_wrapper(compiler: dict[str, Any]) -> str:
    """The lean wrapper's status on the pinned torch for an env with these registry options.

    Without the in-place state (``in_place=False``) the flat call returns its RNG key inputs
    as they are, so inductor's own call is the right one: ``not_needed``.
    """
    return "not_needed" if compiler.get("in_place") is False else "applied"


def assert_fast_path(
    report: CompileReport | None, cpp_schedule: str | None = None, lean_wrapper: str = "applied"
) -> None:
    """The guard-free path ran, no strategy fell back and no pass failed unexpectedly.

    On the pinned torch, the direct call applied, the lean wrapper's status is
    ``lean_wrapper``, and the C++ pass's status is ``cpp_schedule`` where given.
    """
    assert report is not None, "no compile report: the step was not compiled"
    assert report.strategy in ("in_place_state", "flat_call"), str(report)
    assert report.fallbacks == (), str(report)
    if PINNED:
        assert report.pass_status("direct_call") == "applied", str(report)
        assert report.pass_status("lean_wrapper") == lean_wrapper, str(report)
    else:
        assert all(p.status != "failed" for p in report.passes), str(report)
        if cpp_schedule is not None:
            assert report.pass_status("cpp_schedule") == cpp_schedule, str(report)
