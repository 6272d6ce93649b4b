"""The rollout collector's buffers equal a hand-written loop of policy calls and env steps."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import pytest
import torch
from torch.utils._pytree import tree_leaves

import gpuvec_envs  # noqa: F401 - registers the IDs
from gpuvec_envs import rollout
from gpuvec_envs.compiler import flat
from gpuvec_envs.rollout import RolloutCollector

N, T = 16, 25


def make(device="cpu"):
    return gym.make_vec(
        "gpuvec/CartPole-v1",
        num_envs=N,
        dtype=torch.float64,
        max_episode_steps=12,
        backend="eager",
        device=device,
    )


class Policy(torch.nn.Module):
    """A linear policy; odd envs push the pole over (terminations), even envs balance."""

    def __init__(self, device="cpu"):
        super().__init__()
        self.net = torch.nn.Linear(4, 2, dtype=torch.float64, device=device)
        with torch.no_grad():
            self.net.weight.copy_(torch.tensor([[0.0, 0.0, -3.0, -1.0], [0.0, 0.0, 3.0, 1.0]]))
            self.net.bias.zero_()
        sign = torch.ones(N, 1, dtype=torch.float64, device=device)
        sign[1::2] = -1.0
        self.register_buffer("sign", sign)

    def forward(self, obs):
        logits = self.net(obs) * self.sign
        logp = torch.log_softmax(logits, -1)
        action = logits.argmax(-1)
        return {
            "action": action,
            "log_prob": logp.gather(1, action[:, None])[:, 0],
            "value": logits.sum(-1),
            "u": torch.rand(N, dtype=obs.dtype, device=obs.device),  # fresh at every step
        }


def expect_loop(out, policy, ref, obs, extras=True):
    """Assert that the rollout ``out`` is ``policy`` stepped T times in ``ref`` from ``obs``
    (and, with ``extras``, its log-probs and values); return the observation after it."""
    with torch.no_grad():
        for t in range(T):
            p = policy(obs)
            nxt, rew, term, trunc, _ = ref.step(p["action"])
            torch.testing.assert_close(out.obs[t], obs, rtol=0, atol=1e-12)
            assert torch.equal(out.actions[t], p["action"])
            assert torch.equal(out.rewards[t], rew)
            assert torch.equal(out.terminated[t], term)
            assert torch.equal(out.truncated[t], trunc)
            if extras:
                torch.testing.assert_close(out.extras["log_prob"][t], p["log_prob"])
                torch.testing.assert_close(out.extras["value"][t], p["value"])
            obs = nxt
    return obs


def check_against_loop(backend, device="cpu", collects=2, module_policy=False, **kwargs):
    """Compare ``collects`` rollouts with a loop; between rollouts the policy's weights
    change in place (as an optimizer step does). ``module_policy``: pass the module itself
    (traced with its weights as inputs) instead of a plain function that calls it."""
    env, ref = make(device), make(device)
    env.reset(seed=3)
    obs, _ = ref.reset(seed=3)
    module = Policy(device)
    policy = module if module_policy else (lambda obs: module(obs))
    collector = RolloutCollector(env, policy, T, backend=backend, **kwargs)
    for i in range(collects):
        if i == 1:  # the weights are read at every call, not baked into the compiled code
            with torch.no_grad():
                module.net.bias.copy_(torch.tensor([0.4, -0.4], dtype=torch.float64))
        out = collector.collect()
        obs = expect_loop(out, policy, ref, obs)
        torch.testing.assert_close(out.next_obs, obs, rtol=0, atol=1e-12)
        # a random op inside the compiled loop draws new numbers at every step and env (a
        # draw reused across steps or envs would leave at most T or N distinct values);
        # compiled float64 draws are float32 ones (~2**24 distinct values), so an equal pair
        # among the T * N = 400 turns up in ~0.5 % of runs
        u = out.extras["u"]
        assert ((u >= 0) & (u < 1)).all() and u.unique().numel() >= T * N - 2
        # the env itself advanced: counters, elapsed and pending resets agree
        for a, b in zip(env.unwrapped.state[1:], ref.unwrapped.state[1:], strict=True):
            assert torch.equal(a, b)
    assert out.terminated.any() and out.truncated.any()
    return collector


def test_eager_collector_equals_loop():
    c = check_against_loop("eager")
    assert c.kind == "env_step" and "backend='eager'" in c.reason
    b = c.buffers
    assert b.obs.shape == (T, N, 4) and b.actions.dtype == torch.int64
    assert b.terminated.dtype == torch.bool and b.rewards.shape == (T, N)


def test_scan_collector_equals_loop():
    """The default CPU path: the whole T-step rollout as one compiled scan call (a plain
    function as the policy: compiled by ``torch.compile``, which lifts its weights)."""
    c = check_against_loop("compile", collects=3, scan=True)
    assert c.kind == "scan"
    assert (rollout.PYTHON_WRAPPER_WHY in c.reason) is not rollout.CPP_WRAPPER_SCAN


@pytest.mark.heavy
def test_scan_with_the_python_wrapper_equals_loop(monkeypatch):
    """The scan as torch releases before 2.13 build it (inductor's Python wrapper), here
    on whatever torch runs the suite: equal to the loop, and the reason says so."""
    monkeypatch.setattr(rollout, "CPP_WRAPPER_SCAN", False)
    monkeypatch.setitem(rollout.SCAN_INDUCTOR_OPTIONS, "cpp_wrapper", False)
    c = check_against_loop("compile", collects=2, module_policy=True, scan=True)
    assert c.kind == "scan" and rollout.PYTHON_WRAPPER_WHY in c.reason


@pytest.mark.heavy
def test_scan_collector_with_module_policy_equals_loop():
    """An ``nn.Module`` policy: traced with its parameters and buffers as inputs straight
    into one ``compile_flat`` graph (no dynamo)."""
    before = flat.compiled_graphs
    c = check_against_loop("compile", collects=3, module_policy=True, scan=True)
    assert c.kind == "scan" and flat.compiled_graphs == before + 1


@pytest.mark.heavy
def test_auto_collector_tries_both_paths_and_equals_loop():
    """The default: the scan and the env's own step in turn, every rollout equal to the loop,
    then the faster one kept."""
    c = check_against_loop("compile", collects=2 + 2 * (RolloutCollector.TRIALS + 1))
    assert c.kind in ("scan", "env_step") and c._path == c.kind
    assert [len(v) for v in c._trial_times.values()] == [RolloutCollector.TRIALS + 1] * 2
    assert c.reason.startswith(f"scan='auto': {c.kind} measured")


@pytest.mark.parametrize("faster", ["scan", "env_step"])
def test_auto_collector_keeps_the_faster_path(faster):
    env = make()
    env.reset(seed=0)
    collector = RolloutCollector(env, lambda obs: obs[:, 2] > 0, 4)
    now = [0.0]
    collector._clock = lambda: now[0]
    collector._scan_fn = object()  # as compiled: the trial phase starts
    runs = []

    def fake(path):
        def run(*_):
            runs.append(path)
            now[0] += 1.0 if path == faster else 3.0
            return collector.buffers

        return run

    collector._collect_scan, collector._collect_env_step = fake("scan"), fake("env_step")
    trials = 2 * (RolloutCollector.TRIALS + 1)
    for _ in range(trials + 100):
        collector.collect()
    assert runs[:trials] == ["scan", "env_step"] * (RolloutCollector.TRIALS + 1)
    assert runs[trials:] == [faster] * 100 and collector.kind == faster  # kept for good
    assert (
        collector.reason
        == f"scan='auto': {faster} measured 3.00x faster (median of 3 rollouts each)"
    )


@pytest.mark.parametrize("when", ["trial", "kept"])
def test_auto_collector_keeps_env_step_when_the_scan_fails(when):
    """A scan that raises during the trials or after it was kept (a recompile, say): one
    warning, the env's state untouched by it, that rollout and every later one collected by
    the env-step loop (equal to a hand-written loop), and the scan never called again."""
    env, ref = make(), make()
    env.reset(seed=4)
    obs, _ = ref.reset(seed=4)
    module = Policy()
    collector = RolloutCollector(env, module, T)
    collector._scan_fn = object()  # as compiled: the trial phase starts
    now, calls = [0.0], []
    collector._clock = lambda: now[0]
    loop = collector._collect_env_step

    def env_step(o):
        now[0] += 3.0
        return loop(o)

    def scan(*_):
        calls.append(len(calls))
        if when == "trial" or collector._path == "scan":
            raise RuntimeError("scan broke")
        now[0] += 1.0
        return loop(env.unwrapped._current_obs())  # what a scan collects

    collector._collect_scan, collector._collect_env_step = scan, env_step
    while when == "kept" and collector._path != "scan":  # the trials keep the scan
        obs = expect_loop(collector.collect(), module, ref, obs)
    with pytest.warns(RuntimeWarning, match="scan failed .*scan broke") as record:
        out = collector.collect()
    assert len(record) == 1 and collector.kind == collector._path == "env_step"
    assert collector.reason == "fallback: the rollout's scan failed (RuntimeError: scan broke)"
    assert record[0].filename == __file__  # pointed at the caller of collect()
    obs = expect_loop(out, module, ref, obs)
    failed = len(calls)
    for _ in range(20):
        obs = expect_loop(collector.collect(), module, ref, obs)
    assert len(calls) == failed
    for a, b in zip(env.unwrapped.state[1:], ref.unwrapped.state[1:], strict=True):
        assert torch.equal(a, b)


def test_loop_collector_equals_loop():
    """``scan=False``: the policy and the env's own step, one call each per step."""
    c = check_against_loop("compile", scan=False)
    assert c.kind == "env_step" and c._scan_fn is None and "scan=False" in c.reason


@pytest.mark.parametrize("backend", ["eager", pytest.param("compile", marks=pytest.mark.heavy)])
def test_collector_keeps_its_final_obs_until_the_state_changes(backend, monkeypatch):
    """A rollout that starts where the collector's last one ended reuses that one's final
    observation (eager: no observation call but the steps' own); any change in between (a
    step, a reset, a new physical state, new params) is seen, and new params rebuild the
    collector's step."""
    env, ref = make(), make()
    env.reset(seed=5)
    obs, _ = ref.reset(seed=5)
    module = Policy()
    collector = RolloutCollector(env, module, T, backend=backend, scan=backend == "compile")
    obs = expect_loop(collector.collect(), module, ref, obs)
    calls = []
    if backend == "eager":  # a compiled step would trace the spy
        env_def = env.unwrapped.env_def
        observation = type(env_def).observation
        spy = lambda *a: calls.append(1) or observation(*a)  # noqa: E731
        monkeypatch.setattr(type(env_def), "observation", spy)
        out = collector.collect()
        assert len(calls) == T  # one per step, in the step
        obs = expect_loop(out, module, ref, obs)

    def step(e):
        return e.step(torch.arange(N) % 2)[0]

    def reset_some(e):
        e.reset(options={"reset_mask": torch.arange(N) < 5})
        return e.unwrapped._current_obs()

    def new_physics(e):
        s = e.unwrapped.state.env
        e.unwrapped.set_env_state(type(s)(*(x * 0.5 for x in s)))
        return e.unwrapped._current_obs()

    def new_params(e):  # CartPole's observation does not depend on them: count the calls
        e.unwrapped.set_params(theta_threshold_degrees=3.0)
        before = len(calls)
        obs = e.unwrapped._current_obs()
        assert len(calls) == before + (backend == "eager")
        return obs

    for change in (step, reset_some, new_physics, new_params):
        assert torch.equal(change(env), obs := change(ref))
        obs = expect_loop(collector.collect(), module, ref, obs)


def test_collector_rejects_bad_policy_output():
    env = make()
    env.reset(seed=0)
    with pytest.raises(ValueError, match="shape"):
        RolloutCollector(env, lambda obs: torch.zeros(N + 1, dtype=torch.int64), 3).collect()
    with pytest.raises(TypeError, match="action"):
        RolloutCollector(env, lambda obs: {"a": obs}, 3).collect()
    with pytest.raises(ValueError, match="scan"):
        RolloutCollector(env, lambda obs: obs, 3, scan="yes")
    with pytest.raises(ValueError, match="num_threads"):
        RolloutCollector(env, lambda obs: obs, 3, num_threads=0)


def _one_id_per_class() -> list[str]:
    from registry_ids import GENERIC

    seen: set[object] = set()
    return [e.id for e in GENERIC if not (e.env_def in seen or seen.add(e.env_def))]


#: Classes whose scan the fast suite compiles (the rest: ``-m heavy``); CartPole has its
#: own tests.
FAST_CLASSES = ("gpuvec/MinAtar-Breakout-v0", "gpuvec/MiniGrid-Empty-5x5-v0")


def _class_mark(env_id: str) -> pytest.MarkDecorator:
    """``heavy`` (CI) for classic control and :data:`CI_GAME_IDS`, ``slow`` for the other
    MinAtar and MiniGrid classes (a scan's compile takes minutes each on 2 cores)."""
    from reproducibility import CI_GAME_IDS, CLASSIC_IDS

    return pytest.mark.heavy if env_id in (*CLASSIC_IDS, *CI_GAME_IDS) else pytest.mark.slow


class CountPolicy(torch.nn.Module):
    """A policy exact in eager and compiled code alike: how many observation entries exceed
    0.1 (an integer count whatever the summation order), mapped onto the action space."""

    def __init__(self, space: gym.Space) -> None:
        super().__init__()
        self.discrete = isinstance(space, gym.spaces.Discrete)
        self.size = int(space.n) if self.discrete else float(space.high.flat[0])

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        count = (obs.flatten(1) > 0.1).sum(1)
        if self.discrete:
            return count % self.size
        return ((count % 3 - 1) * self.size)[:, None].to(obs.dtype)


@pytest.mark.parametrize(
    ("env_id", "kind"),
    [
        pytest.param(i, "module", marks=() if i in FAST_CLASSES else _class_mark(i))
        for i in _one_id_per_class()
    ]
    + [pytest.param(i, "function", marks=pytest.mark.heavy) for i in FAST_CLASSES],
)
def test_scan_collector_equals_a_step_loop_on_every_env_class(env_id, kind):
    """Two compiled scan rollouts equal a hand-written loop of the policy and eager
    ``env.step`` bitwise, in float32 and float64: observations, actions, rewards, flags
    through autoresets (SameStep and time limits), the final observation and the env's
    state. The policy is an ``nn.Module`` (traced straight to inductor) or a plain
    function (through dynamo)."""
    for dtype in (torch.float32, torch.float64):
        _scan_equals_loop(env_id, kind, dtype)


def _scan_equals_loop(env_id: str, kind: str, dtype: torch.dtype) -> None:
    kw = dict(num_envs=6, backend="eager", autoreset_mode="SameStep", max_episode_steps=9)
    kw["dtype"] = dtype
    env, ref = gym.make_vec(env_id, **kw), gym.make_vec(env_id, **kw)
    env.reset(seed=7)
    obs, _ = ref.reset(seed=7)
    module = CountPolicy(env.single_action_space)
    policy = module if kind == "module" else (lambda obs: module(obs))
    collector = RolloutCollector(env, policy, 20, backend="compile", scan=True)

    def same(x: torch.Tensor, y: torch.Tensor) -> None:
        assert torch.equal(x, y)

    ended = 0
    for _ in range(2):
        out = collector.collect()
        assert collector.kind == "scan"
        for t in range(20):
            action = policy(obs)
            same(out.obs[t], obs)
            assert torch.equal(out.actions[t], action)
            obs, rew, term, trunc, _ = ref.step(action)
            same(out.rewards[t], rew)
            assert torch.equal(out.terminated[t], term) and torch.equal(out.truncated[t], trunc)
            ended += int((term | trunc).sum())
        same(out.next_obs, obs)
    for x, y in zip(*(tree_leaves(e.unwrapped.state) for e in (env, ref)), strict=True):
        same(x, y)
    assert ended >= 6  # every env's time limit ended at least one episode


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_graph_collector_equals_loop():
    c = check_against_loop("compile", device="cuda", collects=3)
    assert c.kind == "cuda_graph"


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_graph_step_equals_eager():
    kw = dict(num_envs=N, dtype=torch.float64, max_episode_steps=12, device="cuda", validate=False)
    g = gym.make_vec("gpuvec/CartPole-v1", **kw).unwrapped
    e = gym.make_vec("gpuvec/CartPole-v1", backend="eager", **kw).unwrapped
    g.reset(seed=1)
    e.reset(seed=1)
    gen = torch.Generator().manual_seed(0)
    for _ in range(40):
        a = torch.randint(0, 2, (N,), generator=gen).cuda()
        o1, r1, te1, tr1, _ = g.step(a)
        o2, r2, te2, tr2, _ = e.step(a)
        assert torch.equal(te1, te2) and torch.equal(tr1, tr2) and torch.equal(r1, r2)
        torch.testing.assert_close(o1, o2, rtol=0, atol=1e-12)
    assert g._step.kind == "cuda_graph"


# -- policies that read tensors other than their parameters and buffers --------------------
#: A module-level tensor a policy's forward closes over (normalisation statistics, bounds...).
CLOSED_OVER = torch.arange(1, 401, dtype=torch.int64)


class AttributePolicy(torch.nn.Module):
    """Reads plain tensor attributes (neither parameters nor buffers), exactly: an integer
    weighted count of the observation entries above a threshold, modulo the actions."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.n = n
        self.threshold = torch.tensor(0.5, dtype=torch.float32)
        self.weights = torch.arange(1, 401, dtype=torch.int64)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        above = (obs.flatten(1) > self.threshold).to(torch.int64)
        return (above * self.weights).sum(1) % self.n


class ClosurePolicy(torch.nn.Module):
    """Reads a module-level tensor (and no parameter or buffer)."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.n = n

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return ((obs.flatten(1) > 0.5).to(torch.int64) * CLOSED_OVER).sum(1) % self.n


def closure_function(n: int) -> tuple[Any, torch.Tensor]:
    """A plain function whose closure holds a tensor; returns it and that tensor."""
    weights = torch.arange(1, 401, dtype=torch.int64)

    def policy(obs: torch.Tensor) -> torch.Tensor:
        return ((obs.flatten(1) > 0.5).to(torch.int64) * weights).sum(1) % n

    return policy, weights


@pytest.mark.parametrize(
    "kind",
    [
        "attribute",  # ~40-80 s of compile: the other two kinds run in the heavy suite
        pytest.param("closure", marks=pytest.mark.heavy),
        pytest.param("function", marks=pytest.mark.heavy),
    ],
)
def test_scan_lifts_tensors_that_are_not_parameters_or_buffers(kind):
    """A policy reading plain tensors (an attribute, a module-level tensor, a function's
    closure) scans, reads them at every call (in-place changes between collects are seen)
    and equals a loop of the eager policy and eager ``env.step`` bitwise (MinAtar Breakout:
    integer physics, 400 observation entries)."""
    env_id, n = "gpuvec/MinAtar-Breakout-v0", 6
    kw = dict(num_envs=n, backend="eager", autoreset_mode="SameStep", max_episode_steps=9)
    env, ref = gym.make_vec(env_id, **kw), gym.make_vec(env_id, **kw)
    actions = int(env.single_action_space.n)
    if kind == "attribute":
        policy = AttributePolicy(actions)
        tensor = policy.weights
    elif kind == "closure":
        policy, tensor = ClosurePolicy(actions), CLOSED_OVER
    else:
        policy, tensor = closure_function(actions)
    saved = tensor.clone()
    env.reset(seed=5)
    obs, _ = ref.reset(seed=5)
    collector = RolloutCollector(env, policy, 15, backend="compile", scan=True)
    try:
        seen = set()
        for i in range(2):
            if i == 1:
                tensor.mul_(7).add_(3)  # read at every call, not baked into the compiled code
            out = collector.collect()
            assert collector.kind == "scan" and "fallback" not in collector.reason
            assert collector.reason.startswith("scan=True: the rollout is one compiled scan")
            for t in range(15):
                action = policy(obs)
                assert torch.equal(out.obs[t], obs)
                assert torch.equal(out.actions[t], action)
                seen.add(tuple(action.tolist()))
                obs, rew, term, trunc, _ = ref.step(action)
                assert torch.equal(out.rewards[t], rew)
                assert torch.equal(out.terminated[t], term)
                assert torch.equal(out.truncated[t], trunc)
            assert torch.equal(out.next_obs, obs)
        for x, y in zip(*(tree_leaves(e.unwrapped.state) for e in (env, ref)), strict=True):
            assert torch.equal(x, y)
        assert len({a for row in seen for a in row}) == actions  # every action was taken
        lifted = {
            "attribute": "reads 2 tensor(s) that are neither parameters nor buffers (() "
            "torch.float32, (400,) torch.int64): traced by dynamo, which lifts them as inputs",
            "closure": "reads 1 tensor(s) that are neither parameters nor buffers ((400,) "
            "torch.int64)",
            "function": "",  # any plain function goes through dynamo
        }
        assert lifted[kind] in collector.reason
    finally:
        tensor.copy_(saved)
