"""``examples/craftax_ppo.py`` runs end to end (smoke) and counts achievements right."""

from __future__ import annotations

import importlib.util
import json
import math
import pathlib

import gymnasium as gym
import pytest
import torch
from gymnasium.vector import AutoresetMode

import gpuvec_envs  # noqa: F401  (registers gpuvec/...)
from gpuvec_envs.adapters.cleanrl import RecordEpisodeStatistics
from gpuvec_envs.envs.craftax.classic import ACHIEVEMENTS, craftax_score

EXAMPLES = pathlib.Path(__file__).resolve().parents[1] / "examples"
# 2 iterations of 8 envs x 16 steps
TINY = (
    "--no-cuda --quiet --num-envs 8 --num-steps 16 --total-timesteps 256 "
    "--num-minibatches 2 --update-epochs 1 --seed 3"
).split()


@pytest.fixture(scope="module")
def craftax_ppo():
    spec = importlib.util.spec_from_file_location("craftax_ppo", EXAMPLES / "craftax_ppo.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_smoke_ppo_and_random(craftax_ppo, tmp_path, capsys):
    """Two iterations of PPO and of the random baseline: finite losses, the report's keys."""
    path = tmp_path / "random.json"
    rnd = craftax_ppo.main([*TINY, "--random", "--json", str(path)])
    ppo = craftax_ppo.main([*TINY, "--baseline", str(path)])
    for result in (rnd, ppo):
        assert result["global_step"] == 256 and len(result["history"]) == 2
        # 32 steps: no episode ends (random players live ~100+ steps), so no rates yet
        assert result["episodes_total"] == 0 and result["success_rates"] is None
        assert list(result["running_rates"]) == list(ACHIEVEMENTS)
        assert all(0.0 <= r <= 1.0 for r in result["running_rates"].values())
        assert result["running_mean_length"] == 32.0
        assert result["isa"] == torch.backends.cpu.get_cpu_capability()
    assert json.loads(path.read_text())["running_rates"] == rnd["running_rates"]
    assert all(math.isfinite(v) for v in ppo["losses"].values())
    assert 0.0 < ppo["losses"]["entropy"] <= math.log(17) + 1e-6
    table = capsys.readouterr().out.split("achievement")[-1].splitlines()
    assert table[0].split() == ["ppo", "last", "ppo", "all", "random", "z"]
    assert [line.split()[0] for line in table[1:23]] == list(ACHIEVEMENTS)


def test_agent_is_craftaxs_mlp(craftax_ppo):
    """Separate actor and critic MLPs of three 512-unit tanh layers on the (N, 1345) obs."""
    envs = craftax_ppo.make_envs(craftax_ppo.parse_args(["--num-envs", "2"]), torch.device("cpu"))
    agent = craftax_ppo.Agent(envs)
    linears = [
        [m.out_features for m in net if isinstance(m, torch.nn.Linear)]
        for net in (agent.actor, agent.critic)
    ]
    assert linears == [[512, 512, 512, 17], [512, 512, 512, 1]]
    obs, _ = envs.reset(seed=0)
    action, logprob, entropy, value = agent.get_action_and_value(obs)
    assert obs.shape == (2, 1345) and value.shape == (2, 1)
    assert action.shape == logprob.shape == entropy.shape == (2,)
    envs.close()


def test_episode_log_counts_ended_episodes(craftax_ppo):
    """With a 5-step time limit, 12 steps of 4 envs end 8 episodes; the log's rates are those
    of the achievement rows at the ends, and the window keeps the last ones."""
    envs = RecordEpisodeStatistics(
        gym.make_vec(
            "gpuvec/Craftax-Classic-Symbolic-v1",
            num_envs=4,
            autoreset_mode=AutoresetMode.SAME_STEP,
            max_episode_steps=5,
        )
    )
    envs.reset(seed=7)
    log = craftax_ppo.EpisodeLog(12, 4, torch.device("cpu"), window=6)
    ends = []
    gen = torch.Generator().manual_seed(0)
    for t in range(12):
        _, reward, terminated, truncated, info = envs.step(
            torch.randint(0, 17, (4,), generator=gen)
        )
        log.record(t, info)
        assert torch.equal(info["_achievements"], terminated | truncated)
        ends.append(info["achievements"][info["_achievements"]])
    assert log.flush() == 8 and log.episodes == 8
    rows = torch.cat(ends)[-6:].to(torch.float64)
    summary = log.summary()
    assert summary["episodes"] == 6 and summary["mean_length"] == 5.0
    assert list(summary["success_rates"].values()) == rows.mean(0).tolist()
    assert summary["craftax_score"] == craftax_score(rows.mean(0))
    envs.close()


def test_z_score(craftax_ppo):
    """Pooled two-proportion z: 60/100 against 40/100 is 2.83; undefined when both are 0."""
    assert craftax_ppo.z_score(0.6, 100, 0.4, 100) == pytest.approx(2.8284, abs=1e-4)
    assert craftax_ppo.z_score(0.0, 10, 0.0, 10) is None
