"""The compiler layer: switches, reports, alias safety of the C++ pass, process-wide state."""

from __future__ import annotations

import threading
import time
import warnings

import gymnasium as gym
import pytest
import torch
from compile_checks import assert_fast_path, expected_lean_wrapper
from registry_ids import PER_ID
from shift_register import FIELDS, ShiftRegister

import gpuvec_envs  # noqa: F401 - registers the IDs
from gpuvec_envs.compiler import (
    COMPILE_LOCK,
    Backend,
    CompileError,
    CompilerOptions,
    NoFallback,
    compile_flat,
    flat,
    resolve,
)
from gpuvec_envs.compiler.options import from_env
from gpuvec_envs.compiler.passes import cpp_schedule
from gpuvec_envs.core.vector import GpuVecEnv
from gpuvec_envs.registry import REGISTRY

# -- switches -------------------------------------------------------------------------------


def test_options_come_from_defaults_env_var_entry_and_keyword(monkeypatch):
    monkeypatch.delenv("GPUVEC_COMPILER", raising=False)  # tests/conftest.py sets one
    assert resolve() == CompilerOptions()
    monkeypatch.setenv("GPUVEC_COMPILER", " lean_wrapper=0, cpp_schedule=off ")
    assert from_env() == {"lean_wrapper": False, "cpp_schedule": False}
    opts = resolve({"cpp_schedule": True, "inductor": {"max_fusion_size": 8}})
    assert opts.lean_wrapper is False and opts.cpp_schedule is True
    assert dict(opts.inductor) == {"max_fusion_size": 8}
    assert resolve(CompilerOptions.no_passes()) == CompilerOptions(
        direct_call=False,
        lean_wrapper=False,
        cpp_schedule=False,
        vec_paths=False,
        wrapping_mul=False,
        isa_probe=False,
        wide_fusion=False,
    )
    # the registry entry sits below the keyword: Breakout writes no state in place
    env = gym.make_vec("gpuvec/MinAtar-Breakout-v0", num_envs=2, backend="eager").unwrapped
    assert env.compiler_options.in_place is False and env.compiler_options.lean_wrapper is False
    env = gym.make_vec(
        "gpuvec/MinAtar-Breakout-v0",
        num_envs=2,
        backend="eager",
        compiler_options={"in_place": True},
    ).unwrapped
    assert env.compiler_options.in_place is True


def test_bad_options_raise_clear_errors(monkeypatch):
    with pytest.raises(TypeError, match=r"unknown compiler option\(s\) \['lean'\]"):
        GpuVecEnv("gpuvec_envs.envs.classic.cartpole:CartPole", 2, compiler_options={"lean": False})
    with pytest.raises(TypeError, match="cpp_schedule must be a bool"):
        CompilerOptions(cpp_schedule=1)
    with pytest.raises(TypeError, match="dict or a CompilerOptions"):
        GpuVecEnv(
            "gpuvec_envs.envs.classic.cartpole:CartPole", 2, compiler_options="lean_wrapper=0"
        )
    monkeypatch.setenv("GPUVEC_COMPILER", "cpp_schedule=2")
    with pytest.raises(ValueError, match="GPUVEC_COMPILER: bad entry 'cpp_schedule=2'"):
        GpuVecEnv("gpuvec_envs.envs.classic.cartpole:CartPole", 2)
    monkeypatch.setenv("GPUVEC_COMPILER", "inductor=1")
    with pytest.raises(ValueError, match="bad entry"):
        resolve()


# -- alias safety of the C++ pass ----------------------------------------------------------

# A loop body in inductor's layout, where in_ptr1 and out_ptr1 are one buffer: the
# kernel's call passes one tensor for both (an input it writes in place).
KERNEL = """\
extern "C"  void  kernel(const int32_t* in_ptr0,
                       const int32_t* in_ptr1,
                       int32_t* out_ptr0,
                       int32_t* out_ptr1)
{
    for(int64_t x0=0; x0<64; x0+=16)
    {
        auto tmp0 = at::vec::Vectorized<int32_t>::loadu(in_ptr0 + x0, 16);
        auto tmp1 = at::vec::Vectorized<int32_t>::loadu(in_ptr1 + x0, 16);
        auto tmp2 = tmp0 + tmp0;
        auto tmp4 = tmp2 * tmp2;
        auto tmp3 = tmp4 * tmp1;
        tmp2.store(out_ptr1 + x0, 16);
        tmp3.store(out_ptr0 + x0, 16);
    }
}"""
WRAPPER = f"""
cpp_fused_demo_0 = async_compile.cpp_pybinding(['const int32_t*'], r'''{KERNEL}''')
class Runner:
    def call(self, args):
        arg0_1, arg1_1 = args
        buf0 = empty_strided_cpu((128, ), (1, ), torch.int32)
        buf1 = reinterpret_tensor(buf0, (64, ), (1, ), 64)  # alias
        cpp_fused_demo_0(arg0_1, arg1_1, buf1, arg1_1)
        return (buf0, )
"""


def statement_order(source: str) -> list[str]:
    out = []
    for line in source.split("\n"):
        s = line.strip()
        if s.startswith("auto tmp"):
            out.append(s.split()[1])
        elif ".store(" in s:
            out.append("store " + s.split("(")[1].split()[0])
    return out


def test_aliases_come_from_the_kernel_calls_in_the_wrapper(monkeypatch):
    aliases = cpp_schedule.kernel_aliases(KERNEL, WRAPPER)
    assert aliases == {
        "in_ptr0": "in_ptr0",
        "in_ptr1": "in_ptr1",
        "out_ptr0": "out_ptr0",
        "out_ptr1": "in_ptr1",
    }
    two_views = WRAPPER.replace("(arg0_1, arg1_1, buf1, arg1_1)", "(arg0_1, arg1_1, buf1, buf0)")
    assert cpp_schedule.kernel_aliases(KERNEL, two_views)["out_ptr1"] == "out_ptr0"
    assert "no call" in cpp_schedule.kernel_aliases(KERNEL, WRAPPER.replace("0(arg0_1", "1(arg0"))
    monkeypatch.setattr(cpp_schedule, "MIN_ACCESSES", 3)
    # by names alone the store to out_ptr1 would rise above the load of in_ptr1 (its old
    # value, still needed); with the map it stays after it
    by_names = statement_order(cpp_schedule.schedule_source(KERNEL, {}))
    assert by_names.index("store out_ptr1") < by_names.index("tmp1")
    safe = statement_order(cpp_schedule.schedule_source(KERNEL, aliases))
    assert safe == ["tmp0", "tmp2", "tmp4", "tmp1", "store out_ptr1", "tmp3", "store out_ptr0"]
    # an unknown map: every pointer is one buffer, so every store follows every load
    unknown = statement_order(cpp_schedule.schedule_source(KERNEL, None))
    assert unknown.index("store out_ptr1") > unknown.index("tmp1")


@pytest.mark.heavy
def test_shift_register_with_more_than_32_fields_equals_eager():
    """Every new field is computed from other fields' old values; the C++ pass is on, with
    the alias map built from the wrapper, and the compiled env equals the eager one."""
    assert 2 * FIELDS > cpp_schedule.MIN_ACCESSES
    n = 64
    compiled = GpuVecEnv(ShiftRegister(), n, backend="compile", compiler_options={})
    eager = GpuVecEnv(ShiftRegister(), n, backend="eager")
    assert torch.equal(compiled.reset(seed=3)[0], eager.reset(seed=3)[0])
    gen = torch.Generator().manual_seed(0)
    dones = 0
    for t in range(40):
        action = torch.randint(0, 3, (n,), generator=gen)
        out_c, out_e = compiled.step(action), eager.step(action)
        for x, y in zip(out_c[:4], out_e[:4], strict=True):
            assert torch.equal(x, y), t
        dones += int(out_e[2].sum())
    assert dones > 0
    report = compiled.compile_report
    assert_fast_path(report, cpp_schedule="applied")
    assert "alias map unknown" not in next(p.detail for p in report.passes)


# -- process-wide state --------------------------------------------------------------------


def _patched_attributes() -> dict[str, object]:
    from torch._inductor.async_compile import AsyncCompile

    return {
        "cpp_pybinding": AsyncCompile.__dict__.get("cpp_pybinding"),
        "size_asserts": torch._inductor.config.size_asserts,
        "max_fusion_size": torch._inductor.config.max_fusion_size,
    }


def _small(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return x * 3 + y, (x ^ y) & 7


@pytest.mark.skipif(
    torch.torch_version.TorchVersion(torch.__version__) < (2, 13),
    reason="torch 2.11 crashes on a fake-tensor trace in the main thread after one in another "
    "thread (make_fx alone; docs/compiler.md#torch-versions)",
)
def test_no_torch_patch_outlives_a_compile_and_threads_compile_one_at_a_time():
    original = _patched_attributes()
    x, y = torch.arange(32, dtype=torch.int32), torch.full((32,), 5, dtype=torch.int32)
    options = {"inductor": {"max_fusion_size": 7}}
    results: list[object] = []

    def compile_in_thread() -> None:
        results.append(compile_flat(_small, (x, y), compiler=resolve(options)))

    with COMPILE_LOCK:  # a compile in another thread waits for the lock
        worker = threading.Thread(target=compile_in_thread)
        worker.start()
        time.sleep(0.5)
        assert worker.is_alive() and not results
    worker.join(timeout=300)
    call = results[0]
    assert all(map(torch.equal, call(x, y), _small(x, y)))
    assert _patched_attributes() == original

    # a compile that fails inside the patched section (inductor compares the bad value)
    bad = resolve({"inductor": {"max_fusion_size": "seven"}})
    with pytest.raises(Exception):  # noqa: B017 - whatever inductor raises
        compile_flat(_small, (x + 1, y), compiler=bad)
    assert _patched_attributes() == original


@pytest.mark.heavy
def test_compile_flat_with_the_cpp_wrapper_says_which_passes_it_skips():
    """A graph built with inductor's C++ wrapper (the rollout scan, CleanRL's update): the
    passes on the Python wrapper and on separately built kernels do not see it, and say so
    as ``off`` with the reason, without a warning (a ``failed`` pass warns)."""
    x, y = torch.arange(64, dtype=torch.int64), torch.arange(64, dtype=torch.int64) + 5
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        call = compile_flat(_small, (x, y), options={"cpp_wrapper": True})
    assert all(map(torch.equal, call(x, y), _small(x, y)))
    passes = {p.name: p for p in call.passes}
    for name in ("lean_wrapper", "cpp_schedule", "vec_paths"):
        assert (passes[name].status, passes[name].detail) == ("off", flat.CPP_WRAPPER_WHY)
    assert passes["direct_call"].status == "applied"
    assert "failed" not in {p.status for p in call.passes}


@pytest.mark.parametrize("size_asserts", [True, False])
def test_compile_flat_compiles_for_the_example_shapes(size_asserts):
    """Static shapes, with and without inductor's size asserts (on torch 2.14.1 a dimension
    left symbolic was bound only inside the asserts: a NameError without them)."""
    from torch._inductor.scheduler import Scheduler

    from gpuvec_envs.compiler.options import WIDE_FUSION

    rule = Scheduler.are_long_distant_nodes
    x, y = torch.arange(64, dtype=torch.int64), torch.arange(64, dtype=torch.int64) + 5
    call = compile_flat(_small, (x, y), size_asserts=size_asserts)
    assert all(map(torch.equal, call(x, y), _small(x, y)))
    assert Scheduler.are_long_distant_nodes is rule  # lifted while compiling only
    wide = next(p for p in call.passes if p.name == "wide_fusion")
    assert wide.detail == f"max_fusion_size {WIDE_FUSION}, any distance"
    status = {p.name: p.status for p in call.passes}
    # isa_probe: not needed once something else had inductor probe every ISA (dynamo)
    assert status.pop("isa_probe") in ("applied", "not_needed")
    assert status == {
        "direct_call": "applied",
        "lean_wrapper": "applied",
        "cpp_schedule": "not_needed",
        "vec_paths": "applied",
        "wrapping_mul": "not_needed",
        "wide_fusion": "applied",
        "dynamic_batch": "off",
        "eager_math": "not_needed",
    }
    if not size_asserts:  # a kernel for 64 elements reads the first 64 of longer inputs
        out = call(torch.arange(128), torch.arange(128) + 5)
        assert [tuple(t.shape) for t in out] == [(64,), (64,)]
        assert all(map(torch.equal, out, _small(x, y)))


def test_every_fallback_is_reported_and_warned_naming_its_backend():
    """Not once per process: a second function that falls back warns too, by its label."""

    def impure(x: torch.Tensor) -> torch.Tensor:
        return x + 1 if x.sum().item() > 0 else x - 1

    for label in ("first env", "second env"):
        with pytest.warns(RuntimeWarning) as record:
            backend = Backend(impure, (), "compile", "warn_each", label=label)
            assert torch.equal(backend(torch.ones(3)), torch.full((3,), 2.0))
        messages = [str(w.message) for w in record]
        assert any(
            f"{label}: the flat_call strategy failed; falling back to" in m for m in messages
        )
        assert any(
            f"{label}: the torch_compile strategy failed; falling back to eager" in m
            for m in messages
        )
        assert backend.report.strategy == "eager"
        assert [f.strategy for f in backend.report.fallbacks] == ["flat_call", "torch_compile"]


def test_untrusted_cpu_code_stays_eager_loudly(monkeypatch):
    """Where inductor's C++ is known to compute other values (AVX2 before torch 2.13; here
    made so by moving the threshold), compile_flat refuses and a backend stays eager for
    good, warning and naming the reason in its report; CUDA tensors are not concerned."""

    def step(x: torch.Tensor) -> tuple[torch.Tensor]:
        return (torch.where(x != 0, (x & 15) - 1, -9),)

    x = torch.arange(-40, 40, dtype=torch.int32)
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "AVX2")
    monkeypatch.setattr(flat, "AVX2_TRUSTED_FROM", (99,))
    with pytest.raises(flat.UntrustedCpuCode, match="AVX2 code"):
        compile_flat(step, (x,))
    assert flat.untrusted_cpu_code([x.to("meta")]) is None
    with pytest.warns(RuntimeWarning, match="int32 selects wrongly in AVX2 code"):
        backend = Backend(step, (), "compile", "untrusted", label="mine")
        assert torch.equal(backend(x)[0], step(x)[0])
    assert backend.kind == "eager" and backend.report.strategy == "eager"
    assert any("would not equal eager" in f.reason for f in backend.report.fallbacks)
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "AVX512")
    assert flat.untrusted_cpu_code([x]) is None


def test_strict_raises_instead_of_falling_back():
    def impure(x: torch.Tensor) -> torch.Tensor:
        return x + 1 if x.sum().item() > 0 else x - 1

    backend = Backend(impure, (), "compile", "strict", compiler={"strict": True}, label="mine")
    for _ in range(2):  # nothing is kept: every call tries (and raises) again
        with pytest.raises(CompileError, match="mine: the flat_call strategy failed"):
            backend(torch.ones(3))
    assert backend.report is None


def test_the_functions_own_error_is_raised_at_once_not_a_fallback():
    class Rejected(ValueError, NoFallback):
        pass

    calls = []

    def picky(x: torch.Tensor) -> torch.Tensor:
        calls.append(x.shape)
        if x.dtype != torch.float32:  # trace-time metadata
            raise Rejected(f"picky takes float32, got {x.dtype}")
        return x + 1

    import warnings

    backend = Backend(picky, (), "compile", "no_fallback")
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message="gpuvec_envs compiler")
        for _ in range(2):  # nothing built: the next call tries again
            with pytest.raises(Rejected, match="picky takes float32, got torch.int64"):
                backend(torch.ones(3, dtype=torch.int64))
    assert len(calls) == 2 and backend.report is None and backend.name == "compile"


# -- every pass off ------------------------------------------------------------------------


@pytest.mark.heavy
@pytest.mark.parametrize(
    "env_id", ["gpuvec/CartPole-v1", "gpuvec/MinAtar-Freeway-v1", "shift_register"]
)
def test_every_pass_off_gives_the_eager_results(env_id):
    """No direct call, no lean wrapper, no C++ pass, no in-place state: a correct env."""
    options = CompilerOptions.no_passes().replace({"in_place": False})
    n = 32
    if env_id == "shift_register":
        compiled, eager = (
            GpuVecEnv(ShiftRegister(), n, backend=b, compiler_options=options)
            for b in ("compile", "eager")
        )
    else:
        compiled, eager = (
            gym.make_vec(env_id, num_envs=n, backend=b, compiler_options=options).unwrapped
            for b in ("compile", "eager")
        )
    compiled.reset(seed=5)
    eager.reset(seed=5)
    gen = torch.Generator().manual_seed(1)
    for t in range(60):
        space = eager.single_action_space
        action = torch.randint(0, int(space.n), (n,), generator=gen)
        out_c, out_e = compiled.step(action), eager.step(action)
        for x, y in zip(out_c[:4], out_e[:4], strict=True):
            assert torch.equal(x, y), t
    report = compiled.compile_report
    assert report.strategy == "flat_call" and report.fallbacks == (), str(report)
    assert {p.name: p.status for p in report.passes} == {
        "direct_call": "off",
        "lean_wrapper": "off",
        "cpp_schedule": "off",
        "vec_paths": "off",
        "wrapping_mul": "off",
        "isa_probe": "off",
        "wide_fusion": "off",
        "dynamic_batch": "off",
        "eager_math": "not_needed",
    }


# -- every registered env, every pass on and off (slow) ------------------------------------


def _actions(space: gym.Space, n: int, gen: torch.Generator) -> torch.Tensor:
    if isinstance(space, gym.spaces.Discrete):
        return torch.randint(0, int(space.n), (n,), generator=gen) + int(space.start)
    low = torch.as_tensor(space.low, dtype=torch.float64)
    high = torch.as_tensor(space.high, dtype=torch.float64)
    return low + (high - low) * torch.rand((n, *space.shape), generator=gen, dtype=torch.float64)


#: One ID per env class, its newest version (v0 and v1 of CartPole and of each MinAtar game
#: differ only in parameters); MountainCar and MountainCarContinuous have only a v0.
ONE_ID_PER_ENV = sorted({e.env_def: e.id for e in PER_ID}.values())


@pytest.mark.slow
@pytest.mark.parametrize("passes", ["on", "off"])
@pytest.mark.parametrize("env_id", ONE_ID_PER_ENV)
def test_every_registered_env_with_passes_on_and_off_equals_eager(env_id, passes):
    """Compiled (registry options; every pass on, or all off) vs eager, 200 steps, states
    synced each step; integer games bitwise, float64 physics to 1e-9, flags exact."""
    options = None if passes == "on" else {"direct_call": False, "lean_wrapper": False}
    if passes == "off":
        options.update(
            cpp_schedule=False,
            vec_paths=False,
            wrapping_mul=False,
            isa_probe=False,
            wide_fusion=False,
        )
    n = 64
    kwargs = {"num_envs": n, "dtype": torch.float64, "compiler_options": options}
    compiled = gym.make_vec(env_id, backend="compile", **kwargs).unwrapped
    eager = gym.make_vec(env_id, backend="eager", **kwargs).unwrapped
    compiled.reset(seed=2)
    eager.reset(seed=2)
    gen = torch.Generator().manual_seed(3)
    for t in range(200):
        action = _actions(eager.single_action_space, n, gen)
        out_c, out_e = compiled.step(action), eager.step(action)
        torch.testing.assert_close(out_c[0], out_e[0], rtol=0, atol=1e-9, msg=f"step {t}")
        torch.testing.assert_close(out_c[1], out_e[1], rtol=0, atol=1e-9, msg=f"step {t}")
        assert torch.equal(out_c[2], out_e[2]) and torch.equal(out_c[3], out_e[3]), t
        compiled.set_env_state(eager.state.env)
    report = compiled.compile_report
    print(env_id, passes, report)
    if passes == "on":
        entry = next(e for e in REGISTRY if e.id == env_id)
        assert_fast_path(report, lean_wrapper=expected_lean_wrapper(entry.compiler))
    else:
        assert report.fast_path and report.fallbacks == (), str(report)
        assert {p.status for p in report.passes} == {"off"}, str(report)
