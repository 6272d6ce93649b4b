"""Fused (compiled) step vs eager step, frame skip semantics, RNG layout, fusion helpers."""

from __future__ import annotations

from typing import NamedTuple

import gymnasium as gym
import pytest
import torch

import gpuvec_envs  # noqa: F401 - registers the IDs
from gpuvec_envs import compiler
from gpuvec_envs.compiler.passes.lean_wrapper import lean_wrapper
from gpuvec_envs.core.rng import STEP, Rng, hash32, hash32_int, keys_from_seeds, stream_constant

N = 64


def make(**kw):
    kw.setdefault("dtype", torch.float64)
    kw.setdefault("backend", "compile")
    return gym.make_vec("gpuvec/CartPole-v1", num_envs=N, validate=False, **kw).unwrapped


def test_hash32_int_matches_tensor_hash():
    x = torch.randint(0, 2**32, (5000,), generator=torch.Generator().manual_seed(0))
    x[:2] = torch.tensor([0, 2**32 - 1])
    assert [hash32_int(int(v)) for v in x] == hash32(x).tolist()
    assert stream_constant(5) == hash32_int(11)
    assert stream_constant(5000) == hash32_int(10001)
    assert hash32_int(0) == 0 and hash32_int(1) == int(hash32(torch.tensor([1]))[0])


@pytest.mark.parametrize("shape", [(), (1,), (4,), (2, 3), (16,), (17,), (5, 5)])
def test_draws_follow_the_stream_formula(shape):
    """Stream k of a draw is hash32(base ^ hash32(2k + 1)); the bits must never change."""
    k0, k1 = keys_from_seeds(torch.arange(37))
    rng = Rng(k0, k1, torch.arange(37) * 3, STEP)
    rng.bits(3)  # start at a stream offset
    got = rng.bits(*shape)
    count = 1
    for s in shape:
        count *= s
    streams = torch.arange(3, 3 + count)
    want = hash32(rng._base[:, None] ^ hash32(streams * 2 + 1)[None, :]).reshape(37, *shape)
    assert got.shape == (37, *shape)
    assert torch.equal(got, want)
    unit = rng.uniform(*shape, low=-2.0, high=3.0, dtype=torch.float64)
    streams = torch.arange(3 + count, 3 + 2 * count)
    bits = hash32(rng._base[:, None] ^ hash32(streams * 2 + 1)[None, :]).reshape(37, *shape)
    assert torch.equal(unit, -2.0 + 5.0 * ((bits >> 8).to(torch.float64) * 2.0**-24))


class Inner(NamedTuple):
    a: torch.Tensor
    b: torch.Tensor | None


class Outer(NamedTuple):
    inner: Inner
    c: torch.Tensor


def test_generated_flatten_and_unflatten_round_trip():
    t = [torch.full((2,), float(i)) for i in range(4)]
    tree = Outer(Inner(t[0], None), t[1])
    flat = compiler.make_flattener((tree, t[2], (t[3],)))(tree, t[2], (t[3],))
    assert all(x is y for x, y in zip(flat, (t[0], t[1], t[2], t[3]), strict=True))
    rebuilt = compiler.make_unflattener(tree)((t[3], t[2]))
    assert type(rebuilt) is Outer and type(rebuilt.inner) is Inner
    assert rebuilt.inner.a is t[3] and rebuilt.inner.b is None and rebuilt.c is t[2]


def test_fused_step_equals_eager_float64_with_frame_skip_and_resets():
    """One compiled graph: frame_skip=2, time limit inside the skip, autoresets (RNG)."""
    fused = make(frame_skip=2, max_episode_steps=15)
    eager = make(frame_skip=2, max_episode_steps=15, backend="eager")
    o1, _ = fused.reset(seed=11)
    o2, _ = eager.reset(seed=11)
    gen = torch.Generator().manual_seed(1)
    n_term = n_trunc = 0
    for t in range(80):
        a = torch.randint(0, 2, (N,), generator=gen)
        o1, r1, te1, tr1, _ = fused.step(a)
        o2, r2, te2, tr2, _ = eager.step(a)
        assert fused._step.kind == "fused"
        assert torch.equal(te1, te2) and torch.equal(tr1, tr2), t
        assert torch.equal(r1, r2), t
        assert te1.dtype == torch.bool and r1.dtype == torch.float64
        torch.testing.assert_close(o1, o2, rtol=0, atol=1e-12)
        n_term += int(te1.sum())
        n_trunc += int(tr1.sum())
    for a, b in zip(fused.state[1:], eager.state[1:], strict=True):
        assert torch.equal(a, b)
    assert n_term > 20 and n_trunc > 20  # both kinds of episode end were exercised


def test_compiled_step_writes_the_state_in_place_and_state_is_a_copy():
    """The compiled CPU step keeps its state in the same buffers; ``state`` is a snapshot,
    and a state set from outside (reset, ``set_env_state``) is copied in and stepped."""
    fused, eager = make(max_episode_steps=15), make(max_episode_steps=15, backend="eager")
    gen = torch.Generator().manual_seed(4)
    actions = [torch.randint(0, 2, (N,), generator=gen) for _ in range(40)]
    for env in (fused, eager):
        env.reset(seed=8)
        env.step(actions[0])
    assert isinstance(fused._step._fn, compiler.InPlaceStateCall)
    buffers = [t.data_ptr() for t in torch.utils._pytree.tree_leaves(fused._state)]
    snapshot = fused.state
    kept = [t.clone() for t in torch.utils._pytree.tree_leaves(snapshot)]
    for a in actions[1:20]:
        torch.testing.assert_close(fused.step(a)[0], eager.step(a)[0], rtol=0, atol=1e-12)
    assert [t.data_ptr() for t in torch.utils._pytree.tree_leaves(fused._state)] == buffers
    assert all(map(torch.equal, torch.utils._pytree.tree_leaves(snapshot), kept))
    # a state from outside: copied into the buffers, then stepped like eager's
    for env in (fused, eager):
        env.set_env_state(snapshot.env)
    fused.reset(seed=9, options={"reset_mask": torch.arange(N) < N // 2})
    eager.reset(seed=9, options={"reset_mask": torch.arange(N) < N // 2})
    for a in actions[20:]:
        o1, _, te1, tr1, _ = fused.step(a)
        o2, _, te2, tr2, _ = eager.step(a)
        torch.testing.assert_close(o1, o2, rtol=0, atol=1e-12)
        assert torch.equal(te1, te2) and torch.equal(tr1, tr2)
    assert [t.data_ptr() for t in torch.utils._pytree.tree_leaves(fused._state)] == buffers
    torch.testing.assert_close(fused.state, eager.state, rtol=0, atol=1e-12)


def test_compile_flat_calls_the_generated_code_directly_with_constants_as_inputs():
    """On the CPU the flat call skips AOT autograd's wrappers: its constants (a table made
    while tracing) become inputs, in-place input updates still land, outputs equal eager's."""

    def fn(x: torch.Tensor, acc: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        table = torch.tensor([3, 1, 4, 1, 5], dtype=torch.int64)  # a traced constant
        acc.add_(table[x % 5])
        return (x * 2 + table.sum(), acc == 0)

    x = torch.arange(7, dtype=torch.int64)
    acc = torch.zeros(7, dtype=torch.int64)
    call = compiler.compile_flat(fn, (x, acc.clone()))
    assert call.flat.__name__ == "direct_call"  # not AOT autograd's forward
    want_acc = acc.clone()
    for _ in range(3):
        got, want = call(x, acc), fn(x, want_acc)
        assert all(map(torch.equal, got, want)) and torch.equal(acc, want_acc)
    assert acc.tolist() == [9, 3, 12, 3, 15, 9, 3]
    # an input that requires grad keeps AOT autograd's wrappers, still given the constants
    w = torch.ones(7, dtype=torch.float64, requires_grad=True)

    def scaled(x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor]:
        return (x * w + torch.tensor([0.5, 0.25], dtype=torch.float64).sum(),)

    wrapped = compiler.compile_flat(scaled, (x.double(), w))
    assert wrapped.flat.__name__ == "with_constants"
    assert torch.equal(wrapped(x.double(), w)[0], x.double() + 0.75)
    # and the in-place state call returns one state object, its buffers
    env = make()
    env.reset(seed=0)
    env.step(torch.zeros(N, dtype=torch.int64))
    first = env._state
    env.step(torch.ones(N, dtype=torch.int64))
    assert env._state is first is env._step._fn.state


@pytest.mark.parametrize("skip", [1, 4])
def test_frame_skip_equals_repeated_action_stopping_at_episode_end(skip):
    """frame_skip=k == k single frames with one action, rewards summed, stopping at the first
    termination or truncation (both can happen inside the skip), reset on the next step."""
    limit = 10
    env = make(frame_skip=skip, max_episode_steps=limit, backend="eager")
    ref = make(autoreset_mode="disabled", backend="eager")  # one frame per step, no limit
    env.reset(seed=5)
    ref.reset(seed=5)
    gen = torch.Generator().manual_seed(2)
    ends_inside = 0
    for _ in range(60):
        a = torch.randint(0, 2, (N,), generator=gen)
        before = env.state
        pending = before.needs_reset.bool()
        obs, rew, term, trunc, _ = env.step(a)
        # reference: repeat the action frame by frame from the same physical state
        ref.set_env_state(before.env)
        alive = torch.ones(N, dtype=torch.bool)
        total = torch.zeros(N, dtype=torch.float64)
        w_term = torch.zeros(N, dtype=torch.bool)
        elapsed = before.elapsed.clone()
        final = ref.env_def.observation(ref.params, ref.state.env)
        for f in range(skip):
            o, r, te, _, _ = ref.step(a)
            total = total + torch.where(alive, r, torch.zeros_like(r))
            w_term = w_term | (alive & te)
            elapsed = elapsed + alive.long()
            final = torch.where(alive[:, None], o, final)
            ended = alive & (te | (elapsed >= limit))
            if f < skip - 1:
                ends_inside += int(ended.sum())
            alive = alive & ~ended
        w_trunc = elapsed >= limit
        live = ~pending  # envs that were not reset by this step
        assert torch.equal(term[live], w_term[live])
        assert torch.equal(trunc[live], w_trunc[live])
        assert torch.equal(rew[live], total[live])
        assert torch.equal(obs[live], final[live])
        assert torch.equal(env.state.elapsed[live], elapsed[live])
        # reset step: reward 0, no flags
        assert not term[pending].any() and not trunc[pending].any()
        assert (rew[pending] == 0).all()
    if skip > 1:
        assert ends_inside > 10


# The form of inductor's generated CPU wrapper, with a Python stand-in for the C++ kernel.
def cpp_fused_demo(x: torch.Tensor, scratch: torch.Tensor, out: torch.Tensor) -> None:
    scratch.copy_(x * 2)
    out.copy_(scratch + 1)


def demo_call(args):  # noqa: ANN001, ANN201 - generated-code style
    (arg0_1,) = args
    args.clear()
    buf0 = empty_strided_cpu((2, 4), (4, 1), torch.int64)
    buf1 = reinterpret_tensor(buf0, (4,), (1,), 4)  # alias
    buf2 = empty_strided_cpu((4,), (1,), torch.int64)
    # Topologically Sorted Source Nodes: [demo]
    cpp_fused_demo(arg0_1, buf1, buf2)
    del arg0_1
    del buf0
    buf3 = torch.ops.aten.view.dtype(buf2, torch.int32)
    buf4 = buf3
    assert_alignment(buf4, 16, "torch.ops.aten.view.dtype")
    return (buf2, reinterpret_tensor(buf4, (4, 2), (2, 1), 0))


def demo_call_sized(args):  # noqa: ANN001, ANN201 - scratch sized by an input
    (arg0_1,) = args
    arg0_1_size = arg0_1.size()
    s0 = arg0_1_size[0]
    buf0 = empty_strided_cpu((2 * s0,), (1,), torch.int64)
    buf1 = reinterpret_tensor(buf0, (s0,), (1,), s0)  # alias
    buf2 = empty_strided_cpu((s0,), (1,), torch.int64)
    cpp_fused_demo(arg0_1, buf1, buf2)
    return (buf2,)


def demo_call_reuse(args):  # noqa: ANN001, ANN201 - inductor's buffer-reuse line
    (arg0_1,) = args
    buf0 = empty_strided_cpu((4,), (1,), torch.int64)
    buf1 = empty_strided_cpu((4,), (1,), torch.int64)
    cpp_fused_demo(arg0_1, buf0, buf1)
    buf2 = buf0; del buf0  # reuse  # noqa: E702  # fmt: skip
    cpp_fused_demo(buf1, buf1, buf2)
    return (buf2,)


def demo_call_unknown(args):  # noqa: ANN001, ANN201
    (arg0_1,) = args
    buf2 = empty_strided_cpu((4,), (1,), torch.int64)
    cpp_fused_demo(arg0_1, buf2, buf2)
    buf2.add_(1)
    return (buf2,)


empty_strided_cpu = torch._C._dynamo.guards._empty_strided_cpu
assert_alignment = torch._C._dynamo.guards.assert_alignment
reinterpret_tensor = torch._C._dynamo.guards._reinterpret_tensor


def test_lean_wrapper_keeps_scratch_and_allocates_fresh_outputs():
    """The lean call allocates the scratch buffer and its view once, the outputs on every
    call (an output kept by the caller is never overwritten); a wrapper with a statement of
    another form gets no lean call."""
    lean = lean_wrapper(demo_call)[0]
    assert lean is not None
    assert "buf1" in lean.__code__.co_freevars  # the scratch view, kept from call to call
    assert "buf2" in lean.__code__.co_varnames  # the output, allocated in the call
    first, first_words = lean([torch.arange(4)])
    second = lean([torch.arange(4) + 10])[0]
    assert first.tolist() == [1, 3, 5, 7] and second.tolist() == [21, 23, 25, 27]
    assert torch.equal(first_words, first.view(torch.int32).view(4, 2))  # a dtype view
    assert "buf2.view(torch.int32)" in lean.source
    assert lean_wrapper(demo_call_unknown)[0] is None
    # a reused buffer that reaches the outputs is allocated per call, with its alias
    reuse = lean_wrapper(demo_call_reuse)[0]
    assert reuse is not None and "buf0" in reuse.__code__.co_varnames
    out_a = reuse([torch.arange(4)])[0]
    out_b = reuse([torch.arange(4)])[0]
    assert out_a.tolist() == [3, 7, 11, 15] and out_a.data_ptr() != out_b.data_ptr()
    # scratch whose size is read from an input is allocated per call
    sized = lean_wrapper(demo_call_sized)[0]
    assert "buf1" in sized.__code__.co_varnames
    assert sized([torch.arange(3)])[0].tolist() == [1, 3, 5]


@pytest.mark.heavy
@pytest.mark.parametrize("wide", [True, False])
def test_frame_skip_of_a_game_compiled_with_and_without_wide_fusion_equals_eager(wide):
    """Breakout, frame_skip=8 (a sticky-action draw per frame), time limit inside the skip,
    SameStep resets: compiled with ``wide_fusion`` on and off, bitwise equal to eager (the
    kernels it makes on CUDA: tests/test_cuda_lowering.py)."""
    kw = dict(
        num_envs=N, validate=False, frame_skip=8, max_episode_steps=21, autoreset_mode="SameStep"
    )
    opts = {"wide_fusion": wide}
    fused = gym.make_vec(
        "gpuvec/MinAtar-Breakout-v1", backend="compile", compiler_options=opts, **kw
    ).unwrapped
    eager = gym.make_vec("gpuvec/MinAtar-Breakout-v1", backend="eager", **kw).unwrapped
    fused.reset(seed=4)
    eager.reset(seed=4)
    gen = torch.Generator().manual_seed(6)
    ended = 0
    for t in range(30):
        a = torch.randint(0, 3, (N,), generator=gen)
        got, want = fused.step(a), eager.step(a)
        for x, y in zip(got[:4], want[:4], strict=True):
            assert torch.equal(x, y), t
        assert torch.equal(got[4]["final_obs"], want[4]["final_obs"]), t
        ended += int((want[2] | want[3]).sum())
    assert ended > N  # the time limit ends every episode inside a skip at least once
    report = fused.compile_report
    assert report.pass_status("wide_fusion") == ("applied" if wide else "off"), str(report)
