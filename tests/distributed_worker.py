"""One rank of tests/test_distributed.py: steps its shard and saves what it saw.

Run by the test as ``python -m torch.distributed.run --nproc_per_node=2 ... THIS OUT BACKEND``.
Rank r writes ``OUT/rank{r}.pt``: for every case of :data:`CASES`, the shard's trajectory
under :func:`action_rule`, its all-reduced episode statistics and (all ranks) the
all-gathered observations and flags.
"""

from __future__ import annotations

import sys

import torch
import torch.distributed as dist
from gymnasium.vector import AutoresetMode

from gpuvec_envs import distributed
from gpuvec_envs.rollout import rollout_episode_stats

NUM_ENVS = 4  # per rank
SEED = 123
#: (env id, make_vec kwargs, steps): staggered terminations and truncations in both
#: autoreset modes.
CASES = {
    "cartpole": (
        "CartPole-v1",
        {"max_episode_steps": 25, "autoreset_mode": AutoresetMode.NEXT_STEP},
        120,
    ),
    "breakout": (
        "MinAtar-Breakout-v1",
        {"max_episode_steps": 20, "autoreset_mode": AutoresetMode.SAME_STEP},
        150,
    ),
}


def action_rule(t: int, global_index: torch.Tensor, n_actions: int) -> torch.Tensor:
    """The action of every env at step ``t``: a hash of ``t`` and the env's global index."""
    h = (global_index * 2654435761 + (t + 1) * 40503) % 2**31
    return (h >> 9) % n_actions


def run_case(env_id: str, kwargs: dict, steps: int, backend: str) -> dict[str, torch.Tensor]:
    """The shard's trajectory from ``reset(seed=SEED)``: obs (T + 1, N, ...), rewards, flags
    and (SAME_STEP) final observations (T, N, ...)."""
    envs = distributed.make_vec(env_id, NUM_ENVS, device="cpu", backend=backend, **kwargs)
    n_actions = int(envs.single_action_space.n)
    obs, _ = envs.reset(seed=SEED)
    out = {"obs": [obs], "reward": [], "terminated": [], "truncated": [], "final_obs": []}
    for t in range(steps):
        obs, reward, terminated, truncated, info = envs.step(
            action_rule(t, envs.global_index, n_actions)
        )
        for key, value in zip(
            ("obs", "reward", "terminated", "truncated"),
            (obs, reward, terminated, truncated),
            strict=True,
        ):
            out[key].append(value.clone())
        if "final_obs" in info:
            out["final_obs"].append(info["final_obs"].clone())
    return {k: torch.stack(v) for k, v in out.items() if v}


def main() -> None:
    out_dir, backend = sys.argv[1], sys.argv[2]
    dist.init_process_group("gloo")
    rank, world_size = distributed.world()
    result: dict = {"rank": rank, "world_size": world_size}
    for name, (env_id, kwargs, steps) in CASES.items():
        traj = run_case(env_id, kwargs, steps, backend)
        result[name] = traj
        if kwargs["autoreset_mode"] is AutoresetMode.SAME_STEP:
            done = (traj["terminated"] | traj["truncated"]).contiguous()
            carry = (
                torch.zeros(NUM_ENVS, dtype=torch.float64),
                torch.zeros(NUM_ENVS, dtype=torch.int64),
            )
            ep_r, ep_l, mask, _ = rollout_episode_stats(traj["reward"], done, carry)
            stats = distributed.all_reduce_episode_stats(ep_r, ep_l, mask)
            result[f"{name}_stats"] = stats._asdict()
        result[f"{name}_gathered_obs"] = distributed.all_gather_envs(traj["obs"], dim=1)
        result[f"{name}_gathered_terminated"] = distributed.all_gather_envs(
            traj["terminated"], dim=1
        )
    # a rank that saw no episode, and one that did: NaN-free global statistics
    none = torch.zeros(3, dtype=torch.bool)
    ended = torch.tensor([rank == 1, False, rank == 1])
    mask = ended if rank == 1 else none
    result["partial_stats"] = distributed.all_reduce_episode_stats(
        torch.tensor([10.0, 99.0, 30.0]), torch.tensor([1, 99, 3]), mask
    )._asdict()
    torch.save(result, f"{out_dir}/rank{rank}.pt")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
