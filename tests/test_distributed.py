"""Envs sharded over torch.distributed processes equal one env of all of them.

The multi-process tests start 2 gloo processes with torchrun on 127.0.0.1
(``tests/distributed_worker.py``, ``examples/torchrun_ppo.py``) and compare what each rank
saw with a single-process env of ``2 * num_envs`` envs stepped here.
"""

from __future__ import annotations

import json
import os
import pathlib
import socket
import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest
import torch
from distributed_worker import CASES, NUM_ENVS, SEED, action_rule
from gymnasium.vector import AutoresetMode

import gpuvec_envs  # noqa: F401  (registers gpuvec/...)
from gpuvec_envs import distributed
from gpuvec_envs.rollout import rollout_episode_stats

ROOT = pathlib.Path(__file__).resolve().parents[1]
WORLD = 2


def torchrun(script: pathlib.Path, *args: str, timeout: float) -> str:
    """Run ``script`` on WORLD local gloo processes; its output (raises on failure)."""
    with socket.socket() as s:  # a free port on the loopback interface
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "GLOO_SOCKET_IFNAME": "lo", "OMP_NUM_THREADS": "1"}
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        f"--nproc_per_node={WORLD}",
        "--nnodes=1",
        "--master_addr=127.0.0.1",
        f"--master_port={port}",
        str(script),
        *args,
    ]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"torchrun failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}"
    assert "terminate called" not in proc.stderr, proc.stderr[-5000:]  # an abort at exit
    return proc.stdout


def reference(env_id: str, kwargs: dict, steps: int, backend: str) -> dict[str, torch.Tensor]:
    """One process, all WORLD * NUM_ENVS envs, the worker's action rule and seed."""
    g = WORLD * NUM_ENVS
    envs = gym.make_vec(f"gpuvec/{env_id}", num_envs=g, device="cpu", backend=backend, **kwargs)
    index = torch.arange(g)
    n_actions = int(envs.single_action_space.n)
    obs, _ = envs.reset(seed=SEED)
    out = {"obs": [obs], "reward": [], "terminated": [], "truncated": [], "final_obs": []}
    for t in range(steps):
        obs, reward, terminated, truncated, info = envs.step(action_rule(t, index, n_actions))
        for key, value in zip(
            ("obs", "reward", "terminated", "truncated"),
            (obs, reward, terminated, truncated),
            strict=True,
        ):
            out[key].append(value.clone())
        if "final_obs" in info:
            out["final_obs"].append(info["final_obs"].clone())
    return {k: torch.stack(v) for k, v in out.items() if v}


def run_shards(tmp: pathlib.Path, backend: str) -> list[dict]:
    torchrun(ROOT / "tests" / "distributed_worker.py", str(tmp), backend, timeout=240)
    return [torch.load(tmp / f"rank{r}.pt") for r in range(WORLD)]


@pytest.fixture(scope="module")
def shards(tmp_path_factory) -> list[dict]:
    """What ranks 0 and 1 saved (eager backend)."""
    return run_shards(tmp_path_factory.mktemp("shards"), "eager")


@pytest.fixture(scope="module")
def references() -> dict[str, dict[str, torch.Tensor]]:
    return {name: reference(*case, backend="eager") for name, case in CASES.items()}


def assert_shards_match(shards: list[dict], refs: dict) -> None:
    """Every case of ``refs``: rank r's trajectory is the slice of rank r's envs."""
    for name, ref in refs.items():
        for r, shard in enumerate(shards):
            assert (shard["rank"], shard["world_size"]) == (r, WORLD)
            got = shard[name]
            assert got.keys() == ref.keys()
            for key, full in ref.items():
                part = full[:, r * NUM_ENVS : (r + 1) * NUM_ENVS]
                assert got[key].dtype == part.dtype and got[key].shape == part.shape, key
                assert torch.equal(got[key], part), f"{name} rank {r}: {key} differs"


@pytest.mark.parametrize("name", list(CASES))
def test_shards_equal_slices_of_one_env_step_for_step(shards, references, name):
    """Rank r's observations, rewards, flags (and SAME_STEP final observations) equal envs
    [r * N, (r + 1) * N) of one env of 2N, every step, through staggered autoresets."""
    ref = references[name]
    assert_shards_match(shards, {name: ref})
    ends = ref["terminated"] | ref["truncated"]
    assert ref["terminated"].any() and ref["truncated"].any()
    assert (ends.sum(0) >= 2).all(), "every env autoresets at least twice"
    end_steps = {tuple(torch.nonzero(ends[:, j])[:, 0].tolist()) for j in range(ends.shape[1])}
    assert len(end_steps) >= 6, "episode ends are staggered across the 8 envs"
    # the shards are different envs, not copies of one
    assert not torch.equal(shards[0][name]["obs"], shards[1][name]["obs"])
    if CASES[name][1]["autoreset_mode"] is AutoresetMode.SAME_STEP:
        assert "final_obs" in ref


def test_episode_stats_are_all_reduced(shards, references):
    """Count, mean, std, min and max of the episodes of both ranks equal those of the
    single-process env's episodes; every rank holds the same values."""
    ref = references["breakout"]
    done = ref["terminated"] | ref["truncated"]
    g = WORLD * NUM_ENVS
    carry = (torch.zeros(g, dtype=torch.float64), torch.zeros(g, dtype=torch.int64))
    ep_r, ep_l, mask, _ = rollout_episode_stats(ref["reward"], done, carry)
    returns, lengths = ep_r[mask].numpy(), ep_l[mask].numpy().astype(np.float64)
    assert len(returns) > 2 * g and returns.max() > returns.min()
    expected = {
        "count": float(len(returns)),
        "return_mean": returns.mean(),
        "return_std": returns.std(),
        "return_min": returns.min(),
        "return_max": returns.max(),
        "length_mean": lengths.mean(),
    }
    for shard in shards:
        got = {k: float(v) for k, v in shard["breakout_stats"].items()}
        assert got == pytest.approx(expected, rel=1e-12, abs=1e-12)
    # rank 0 ended no episode, rank 1 two (returns 10 and 30, lengths 1 and 3)
    partial = {"count": 2.0, "return_mean": 20.0, "return_std": 10.0, "return_min": 10.0}
    partial |= {"return_max": 30.0, "length_mean": 2.0}
    for shard in shards:
        assert {k: float(v) for k, v in shard["partial_stats"].items()} == partial


def test_all_gather_envs_gives_every_rank_the_whole_batch(shards, references):
    for name in CASES:
        for shard in shards:
            assert torch.equal(shard[f"{name}_gathered_obs"], references[name]["obs"])
            flags = shard[f"{name}_gathered_terminated"]
            assert flags.dtype == torch.bool
            assert torch.equal(flags, references[name]["terminated"])


@pytest.mark.slow
def test_compiled_shards_equal_slices_of_one_compiled_env(tmp_path):
    """As the eager test, on the compiled backend (compiles in 3 processes: ~1-2 min)."""
    refs = {name: reference(*case, backend="compile") for name, case in CASES.items()}
    assert_shards_match(run_shards(tmp_path, "compile"), refs)


@pytest.mark.parametrize("backend", ["eager", pytest.param("auto", marks=pytest.mark.heavy)])
def test_ppo_example_runs_on_two_processes(tmp_path, backend):
    """examples/torchrun_ppo.py, a short configuration, end to end on 2 gloo processes.

    With the ``auto`` backend each rank exits while its background compiles (the env's
    step, the collector's scan) are under way: no abort, status 0 (``torchrun``)."""
    out = tmp_path / "result.json"
    args = f"--step-backend {backend} --no-cuda --total-timesteps 2048 --num-steps 64".split()
    stdout = torchrun(
        ROOT / "examples" / "torchrun_ppo.py", *args, f"--result-json={out}", timeout=240
    )
    result = json.loads(out.read_text())
    assert "done: world_size=2 global_step=2048" in stdout
    assert result["world_size"] == 2 and result["global_step"] == 2048
    assert result["episodes"] > 40  # random CartPole episodes last ~20 steps
    assert 8 < result["mean_return"] < 200


@pytest.mark.slow
def test_ppo_example_reaches_475_on_two_processes(tmp_path):
    """CleanRL's defaults over 2 processes (2 envs each): mean return of 20 episodes >= 475
    within 500k steps."""
    out = tmp_path / "result.json"
    torchrun(
        ROOT / "examples" / "torchrun_ppo.py",
        "--no-cuda",
        "--target-return=475",
        "--quiet",
        f"--result-json={out}",
        timeout=1800,
    )
    result = json.loads(out.read_text())
    print(result)
    assert result["reached_at_step"] is not None, result


# -- one process: the world of one, seeding, argument checks ------------------------------


def make(num_envs: int, **kwargs) -> gym.vector.VectorEnv:
    return gym.make_vec("gpuvec/CartPole-v1", num_envs=num_envs, backend="eager", **kwargs)


def test_without_a_process_group_the_world_is_this_process():
    assert distributed.world() == (0, 1)
    envs = distributed.make_vec("CartPole-v1", 3, backend="eager")
    assert isinstance(envs.unwrapped, gpuvec_envs.GpuVecEnv)
    assert envs.unwrapped.spec.id == "gpuvec/CartPole-v1"
    assert (envs.rank, envs.world_size, envs.num_envs, envs.global_num_envs) == (0, 1, 3, 3)
    assert envs.device == distributed.local_device()
    assert torch.equal(envs.reset(seed=7)[0], make(3).reset(seed=7)[0])
    same = distributed.make_vec("gpuvec/CartPole-v1", 3, backend="eager")
    assert same.unwrapped.spec.id == "gpuvec/CartPole-v1"


def test_under_torchrun_without_a_group_make_vec_raises(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(RuntimeError, match="init_process_group"):
        distributed.make_vec("CartPole-v1", 3)


def test_shard_seeds_are_global():
    """Rank 1 of 2 with 3 envs: its envs are envs 3..5 of one env of 6, for an int seed
    and for a list of 6 seeds (it takes its slice), also after steps and autoresets."""
    full = make(6, max_episode_steps=5)
    shard = distributed.ShardedVecEnv(make(3, max_episode_steps=5), rank=1, world_size=2)
    assert (shard.env_offset, shard.global_num_envs) == (3, 6)
    assert shard.global_index.tolist() == [3, 4, 5]
    for seed in (11, [100 + 7 * j for j in range(6)]):
        obs_full, _ = full.reset(seed=seed)
        obs, _ = shard.reset(seed=seed)
        assert torch.equal(obs, obs_full[3:])
        for t in range(12):
            a = action_rule(t, torch.arange(6), 2)
            step_full = full.step(a)
            step = shard.step(a[3:])
            for x, y in zip(step[:4], step_full[:4], strict=True):
                assert torch.equal(x, y[3:])


def test_bad_shard_arguments_raise_and_keep_state():
    shard = distributed.ShardedVecEnv(make(3), rank=1, world_size=2)
    shard.reset(seed=0)
    before = shard.unwrapped.state
    for seed, exc, match in [
        ([1, 2, 3], ValueError, "global_num_envs=6"),
        (2**63 - 5, ValueError, "2\\*\\*63"),
        (-1, ValueError, "seed"),
        (1.5, TypeError, "seed"),
        ("7", TypeError, "seed"),
        (True, TypeError, "seed"),
    ]:
        with pytest.raises(exc, match=match):
            shard.reset(seed=seed)
        for a, b in zip(
            torch.utils._pytree.tree_leaves(shard.unwrapped.state),
            torch.utils._pytree.tree_leaves(before),
            strict=True,
        ):
            assert torch.equal(a, b)
    for rank, world_size, exc in [(2, 2, ValueError), (-1, 2, ValueError), (0, 0, ValueError)]:
        with pytest.raises(exc, match="rank"):
            distributed.ShardedVecEnv(make(3), rank=rank, world_size=world_size)
    with pytest.raises(TypeError, match="rank"):
        distributed.ShardedVecEnv(make(3), rank=1.0, world_size=2)
    with pytest.raises(ValueError, match="no gpuvec env 'NoSuchEnv-v0'"):
        distributed.make_vec("NoSuchEnv-v0", 2)
    with pytest.raises(TypeError, match="env_id must be a str"):
        distributed.make_vec(None, 2)


def test_episode_stats_of_one_process():
    returns = torch.tensor([[1.0, 5.0], [2.0, 7.0], [4.0, 0.5]])
    lengths = torch.tensor([[3, 9], [4, 9], [8, 2]])
    mask = torch.tensor([[True, False], [False, True], [True, True]])
    r, n = np.array([1.0, 7.0, 4.0, 0.5]), np.array([3.0, 9.0, 8.0, 2.0])
    stats = distributed.all_reduce_episode_stats(returns, lengths, mask)
    assert all(v.dtype == torch.float64 and v.shape == () for v in stats)
    expected = {"count": 4.0, "return_mean": r.mean(), "return_std": r.std()}
    expected |= {"return_min": 0.5, "return_max": 7.0, "length_mean": n.mean()}
    assert stats.to_dict() == pytest.approx(expected, rel=1e-15)
    empty = distributed.all_reduce_episode_stats(returns, lengths, torch.zeros_like(mask))
    assert empty.count == 0 and all(np.isnan(v) for k, v in empty.to_dict().items() if k != "count")


def test_episode_stats_and_gather_check_arguments():
    r, n = torch.zeros(4), torch.zeros(4, dtype=torch.int64)
    with pytest.raises(TypeError, match="mask must be a bool tensor"):
        distributed.all_reduce_episode_stats(r, n, torch.zeros(4))
    with pytest.raises(ValueError, match="one shape"):
        distributed.all_reduce_episode_stats(r, n[:3], torch.zeros(4, dtype=torch.bool))
    t = torch.arange(6).reshape(2, 3)
    assert distributed.all_gather_envs(t, dim=1) is t  # a world of one
    with pytest.raises(ValueError, match="dim 2 out of range"):
        distributed.all_gather_envs(t, dim=2)
    with pytest.raises(TypeError, match="expected a tensor"):
        distributed.all_gather_envs([1, 2])
