"""The isa_probe pass: inductor probes only the vector ISA it picks, and picks the same."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys

import pytest
import torch
from torch._inductor import config
from torch._inductor import cpu_vec_isa as m

from gpuvec_envs.compiler.passes import isa_probe


class FakeISA:
    """An ISA whose probe is recorded and whose build result is given."""

    def __init__(self, name: str, builds: bool, probes: list[str]) -> None:
        self.name, self.builds, self.probes = name, builds, probes

    def __str__(self) -> str:
        return self.name

    def __bool__(self) -> bool:
        self.probes.append(self.name)
        return self.builds


NAMES = ("avx512 avx512_vnni amx_tile", "avx512 avx512_vnni", "avx512", "avx2")


@pytest.mark.parametrize("capability", [None, "avx2", "avx512"])
@pytest.mark.parametrize("cpu_flags", [("avx2",), ("avx2", "avx512", "avx512_vnni")])
@pytest.mark.parametrize("broken", [(), ("avx512 avx512_vnni",), ("avx512 avx512_vnni", "avx2")])
def test_picks_what_inductor_picks_from_its_full_list(monkeypatch, capability, cpu_flags, broken):
    """Against inductor's own choice from the full list (every supported ISA probed): the
    same ISA, after probing only up to it in inductor's order."""
    probes: list[str] = []
    fakes = [FakeISA(n, n not in broken, probes) for n in NAMES]
    monkeypatch.setattr(m, "supported_vec_isa_list", fakes)
    monkeypatch.setattr(m, "x86_isa_checker", lambda: list(cpu_flags))
    monkeypatch.setattr(isa_probe, "_PICKED", {})
    monkeypatch.setattr(isa_probe.sys, "platform", "linux")
    monkeypatch.setattr(isa_probe.platform, "machine", lambda: "x86_64")
    assert config.cpp.simdlen is None
    if capability is None:
        monkeypatch.delenv("ATEN_CPU_CAPABILITY", raising=False)
    else:
        monkeypatch.setenv("ATEN_CPU_CAPABILITY", capability)
    isa, what = isa_probe.picked_isa()
    ours = list(probes)
    probes.clear()
    full = [f for f in fakes if all(x in cpu_flags for x in f.name.split()) and f]
    expected = m.get_isa_from_cpu_capability(capability, full, m.invalid_vec_isa) if full else None
    cands = [f.name for f in fakes if all(x in cpu_flags for x in f.name.split())]
    cands = [c for c in cands if capability is None or capability in c]
    if expected is not None and str(expected) in cands:
        assert isa is expected and what == str(expected)
        assert ours == cands[: cands.index(what) + 1]  # in order, up to the picked one
    else:  # nothing of the wanted kind builds: inductor's full list decides
        assert isa is None and what == "no candidate ISA built" and ours == cands
    probes.clear()
    assert isa_probe.picked_isa() == (isa, what) and probes == []  # kept per process


def test_defers_to_inductor_where_the_list_matters(monkeypatch):
    monkeypatch.setattr(isa_probe, "_PICKED", {})
    with config.patch({"cpp.simdlen": 256}):
        assert isa_probe.picked_isa() == (
            None,
            "cpp.simdlen is set (inductor matches it against every valid ISA)",
        )
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "default")
    assert isa_probe.picked_isa()[1] == "ATEN_CPU_CAPABILITY=default (inductor decides it)"
    monkeypatch.delenv("ATEN_CPU_CAPABILITY")
    monkeypatch.setattr(isa_probe.platform, "machine", lambda: "aarch64")
    assert isa_probe.picked_isa()[1].startswith("not an x86 Linux host")


@pytest.mark.parametrize("case", ["applied", "failed", "not_needed"])
def test_picked_only_patches_inductor_and_restores_it(monkeypatch, case):
    original = functools.cache(lambda: ["every ISA"])
    if case == "not_needed":
        original()  # inductor already probed them all in this process
    monkeypatch.setattr(m, "valid_vec_isa_list", original)
    pick = ("isa", "avx512") if case == "applied" else (None, "why not")
    monkeypatch.setattr(isa_probe, "picked_isa", lambda: pick)
    log = isa_probe.ProbeLog()
    with isa_probe.picked_only(log):
        got = m.valid_vec_isa_list()
    assert m.valid_vec_isa_list is original and log.status == case
    assert got == (["isa"] if case == "applied" else ["every ISA"])
    assert (
        log.detail
        == {
            "applied": "probed only 'avx512'",
            "failed": "why not",
            "not_needed": "inductor's full list was already built in this process",
        }[case]
    )


_CHILD = r"""
import json, sys, time, torch
from torch._inductor import cpu_vec_isa as m
from gpuvec_envs.compiler.flat import compile_flat
from gpuvec_envs.compiler.options import resolve
probes = []
check = m.VecISA.check_build
def spy(self, code):
    probes.append(str(self))
    return check(self, code)
m.VecISA.check_build = spy
options = resolve({"isa_probe": sys.argv[1] == "1"})
call = compile_flat(lambda x: (x * 3 + 1,), (torch.arange(40.0),), compiler=options)
during = list(dict.fromkeys(probes))  # the ISAs probed, in order (some twice)
assert torch.equal(call(torch.arange(40.0))[0], torch.arange(40.0) * 3 + 1)
full = str(m.pick_vec_isa())  # outside the pass: inductor's own choice, every ISA probed
status = {p.name: str(p) for p in call.passes}["isa_probe"]
print(json.dumps({"during": during, "full": full, "status": status}))
"""


@pytest.mark.heavy
@pytest.mark.parametrize("on", [True, False])
def test_compile_flat_probes_one_isa_and_inductor_agrees(on, tmp_path):
    """In a fresh process (where inductor has probed nothing): with the pass, the build
    probes one ISA, the one inductor's full probe picks; without it, every supported one."""
    if sys.platform != "linux" or torch.backends.cpu.get_cpu_capability() == "DEFAULT":
        pytest.skip("an x86 Linux host with a vector ISA")
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(tmp_path)}
    env.pop("GPUVEC_COMPILER", None)
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, "1" if on else "0"],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    r = json.loads(out.stdout.strip().splitlines()[-1])
    supported = m.x86_isa_checker()
    candidates = [str(i) for i in m.supported_vec_isa_list if str(i)]
    candidates = [c for c in candidates if all(f in supported for f in c.split())]
    if on:  # the one ISA probed is the one inductor's full probe picks
        assert r["during"] == [r["full"]], r
        assert r["status"] == f"isa_probe: applied (probed only {r['full']!r})"
    else:
        assert r["during"] == candidates and r["status"] == "isa_probe: off", r
