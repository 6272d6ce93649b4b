"""PPO (discrete actions) with DistributedDataParallel: one env shard per process (torchrun).

CleanRL's ``ppo.py`` (agent, losses, GAE and defaults from ``examples/cleanrl_ppo.py``) made
data parallel as in CleanRL's ``ppo_atari_multigpu.py``: every process collects a rollout
of its own shard of ``--num-envs / world_size`` envs (:func:`gpuvec_envs.distributed.make_vec`;
the shards together are one batch of ``--num-envs`` envs, global env j seeded ``seed + j``)
and runs the same number of minibatch steps on its local batch; ``DistributedDataParallel``
averages the gradients over the processes, so each step follows the gradient of the global
minibatch (``world_size`` local minibatches). Once per iteration, all processes also
all-reduce the episode statistics (for logging) and all-gather the per-env episode returns
of the rollout (so every process keeps the same ``--return-window`` and stops at the same
iteration); with ``--target-kl``, the approximate KL is averaged before the early-stop
test. The rollout is :class:`gpuvec_envs.rollout.RolloutCollector` (policy, sampling and
env step compiled); the update is CleanRL's eager one (``loss.backward()`` carries DDP's
gradient all-reduce).

Run on one machine (gloo on CPU, nccl on CUDA, one process per GPU)::

    torchrun --nproc_per_node=2 examples/torchrun_ppo.py --total-timesteps 500000

On several nodes, the same command on each node with torchrun's rendezvous flags (see
docs/distributed.md). Without torchrun it runs as a world of one process.
"""

from __future__ import annotations

import argparse
import collections
import gc
import json
import os
import pathlib
import random
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.optim as optim
from gymnasium.vector import AutoresetMode
from torch.nn.parallel import DistributedDataParallel

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from cleanrl_ppo import Agent, gae, gae_loop, ppo_loss  # noqa: E402

from gpuvec_envs import distributed  # noqa: E402
from gpuvec_envs.rollout import RolloutCollector, rollout_episode_stats  # noqa: E402


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    b = argparse.BooleanOptionalAction
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--torch-deterministic", action=b, default=True)
    p.add_argument("--cuda", action=b, default=True, help="use CUDA (cuda:LOCAL_RANK) if available")
    p.add_argument("--torch-threads", type=int, default=1, help="CPU threads per process")
    p.add_argument("--env-id", default="CartPole-v1", help="without the gpuvec/ namespace")
    p.add_argument("--step-backend", choices=("auto", "eager", "compile"), default="auto")
    p.add_argument("--total-timesteps", type=int, default=500000, help="over all processes")
    p.add_argument("--learning-rate", type=float, default=2.5e-4)
    p.add_argument("--num-envs", type=int, default=4, help="over all processes")
    p.add_argument("--num-steps", type=int, default=128)
    p.add_argument("--anneal-lr", action=b, default=True)
    p.add_argument("--gamma", type=float, default=0.99)
    p.add_argument("--gae-lambda", type=float, default=0.95)
    p.add_argument("--num-minibatches", type=int, default=4, help="per process and epoch")
    p.add_argument("--update-epochs", type=int, default=4)
    p.add_argument("--norm-adv", action=b, default=True)
    p.add_argument("--clip-coef", type=float, default=0.2)
    p.add_argument("--clip-vloss", action=b, default=True)
    p.add_argument("--ent-coef", type=float, default=0.01)
    p.add_argument("--vf-coef", type=float, default=0.5)
    p.add_argument("--max-grad-norm", type=float, default=0.5)
    p.add_argument("--target-kl", type=float, default=None)
    p.add_argument("--target-return", type=float, default=None)
    p.add_argument("--return-window", type=int, default=20)
    p.add_argument("--result-json", default=None, help="rank 0 writes the summary here")
    p.add_argument("--quiet", action="store_true", help="print only the summary")
    return p.parse_args(argv)


def setup(args: argparse.Namespace) -> tuple[int, int, torch.device]:
    """Join torchrun's process group (if launched by it); ``(rank, world_size, device)``."""
    device = distributed.local_device() if args.cuda else torch.device("cpu")
    if "WORLD_SIZE" in os.environ and not dist.is_initialized():
        if device.type == "cuda":
            torch.cuda.set_device(device)
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    rank, world_size = distributed.world()
    if args.num_envs % world_size:
        raise ValueError(f"--num-envs {args.num_envs} is not divisible by {world_size} processes")
    args.local_num_envs = args.num_envs // world_size
    args.local_batch_size = args.local_num_envs * args.num_steps
    args.minibatch_size = args.local_batch_size // args.num_minibatches
    args.num_iterations = args.total_timesteps // (args.num_envs * args.num_steps)
    return rank, world_size, device


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    rank, world_size, device = setup(args)
    log = print if rank == 0 and not args.quiet else lambda *a, **k: None
    # the agent's initial weights are rank 0's (DDP broadcasts them); sampling and
    # minibatch order differ per rank
    random.seed(args.seed + rank)
    np.random.seed(args.seed + rank)
    torch.manual_seed(args.seed + rank)
    torch.backends.cudnn.deterministic = args.torch_deterministic
    torch.set_num_threads(args.torch_threads)
    torch.distributions.Distribution.set_default_validate_args(False)  # no host syncs

    envs = distributed.make_vec(
        args.env_id,
        args.local_num_envs,
        device=device,
        autoreset_mode=AutoresetMode.SAME_STEP,
        backend=args.step_backend,
        validate=False,  # sampled actions are valid
    )
    agent = Agent(envs).to(device)
    ddp = DistributedDataParallel(agent) if world_size > 1 else agent
    optimizer = optim.Adam(ddp.parameters(), lr=args.learning_rate, eps=1e-5)
    collector = RolloutCollector(envs, agent.act, args.num_steps, backend=args.step_backend)
    n = args.local_num_envs
    ep_carry = (
        torch.zeros(n, dtype=torch.float64, device=device),
        torch.zeros(n, dtype=torch.int64, device=device),
    )
    dones = torch.zeros((args.num_steps, n), device=device)
    obs_shape = envs.single_observation_space.shape
    recent: collections.deque[float] = collections.deque(maxlen=args.return_window)

    result = {"world_size": world_size, "reached_at_step": None, "reached_at_s": None}
    result.update(episodes=0, rollout_s=0.0, update_s=0.0)
    global_step = 0
    next_obs, _ = envs.reset(seed=args.seed)
    next_done = torch.zeros(n, device=device)
    start, start_cpu = time.perf_counter(), time.process_time()
    for iteration in range(1, args.num_iterations + 1):
        if args.anneal_lr:
            frac = 1.0 - (iteration - 1.0) / args.num_iterations
            optimizer.param_groups[0]["lr"] = frac * args.learning_rate

        t_rollout = time.perf_counter()
        roll = collector.collect()
        global_step += args.num_steps * args.num_envs
        done = roll.terminated | roll.truncated
        dones[0] = next_done  # dones[t]: the episode ended before step t's observation
        dones[1:] = done[:-1]
        next_obs, next_done = roll.next_obs, done[-1].to(torch.float32)
        ep_r, ep_l, ep_mask, ep_carry = rollout_episode_stats(roll.rewards, done, ep_carry)
        # all processes: one all-reduce for the log, one all-gather for the return window
        stats = distributed.all_reduce_episode_stats(ep_r, ep_l, ep_mask)
        all_r = distributed.all_gather_envs(ep_r, dim=1)
        all_mask = distributed.all_gather_envs(ep_mask, dim=1)
        ended = all_r[all_mask].tolist()  # time-major, global env order: equal on all ranks
        recent.extend(ended)
        result["episodes"] += len(ended)
        t_update = time.perf_counter()
        result["rollout_s"] += t_update - t_rollout
        if iteration == 1:  # includes compiling the rollout
            result["first_rollout_s"] = t_update - t_rollout

        with torch.no_grad():
            next_value = agent.get_value(next_obs).reshape(1, -1)
            vectorised = args.num_steps**2 * n <= 2**24
            advantages, returns = (gae if vectorised else gae_loop)(
                args, roll.rewards, roll.extras["value"], dones, next_value, next_done
            )
        b_obs = roll.obs.reshape((-1,) + obs_shape)
        b_actions = roll.actions.reshape(-1)
        b_logprobs = roll.extras["log_prob"].reshape(-1)
        b_values = roll.extras["value"].reshape(-1)
        b_advantages, b_returns = advantages.reshape(-1), returns.reshape(-1)

        b_inds = np.arange(args.local_batch_size)
        for _epoch in range(args.update_epochs):
            np.random.shuffle(b_inds)
            inds = torch.from_numpy(b_inds).to(device)
            for lo in range(0, args.local_batch_size, args.minibatch_size):
                mb = inds[lo : lo + args.minibatch_size]
                _, newlogprob, entropy, newvalue = ddp(b_obs[mb], b_actions[mb])
                loss, pg_loss, v_loss, entropy_loss, _, approx_kl, _ = ppo_loss(
                    args,
                    newlogprob,
                    entropy,
                    newvalue,
                    b_logprobs[mb],
                    b_advantages[mb],
                    b_returns[mb],
                    b_values[mb],
                )
                optimizer.zero_grad()
                loss.backward()  # DDP: gradients averaged over the processes
                nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
                optimizer.step()
            if args.target_kl is not None:  # every rank must take the same decision
                kl = approx_kl.detach().clone()
                if world_size > 1:
                    dist.all_reduce(kl)
                if float(kl) / world_size > args.target_kl:
                    break
        result["update_s"] += time.perf_counter() - t_update

        elapsed = time.perf_counter() - start
        mean_recent = float(np.mean(recent)) if recent else float("nan")
        if iteration % 10 == 0 or iteration == args.num_iterations:
            s = stats.to_dict()
            log(
                f"global_step={global_step} episodes(this iteration)={int(s['count'])} "
                f"return={s['return_mean']:.1f}±{s['return_std']:.1f} "
                f"mean_return(last {len(recent)})={mean_recent:.1f} "
                f"SPS={int(global_step / elapsed)}"
            )
        if (
            args.target_return is not None
            and len(recent) == recent.maxlen
            and mean_recent >= args.target_return
        ):
            result.update(reached_at_step=global_step, reached_at_s=elapsed)
            log(f"reached mean return {mean_recent:.1f} at {global_step=} after {elapsed:.1f} s")
            break

    wall = time.perf_counter() - start
    result.update(
        global_step=global_step,
        wall_s=wall,
        cpu_s=time.process_time() - start_cpu,  # this process's CPU time (rank 0's in the JSON)
        mean_return=float(np.mean(recent)) if recent else float("nan"),
        rollout_env_steps_per_s=global_step / max(result["rollout_s"], 1e-9),
        device=str(device),
        torch_threads=torch.get_num_threads(),
        cpu_capability=torch.backends.cpu.get_cpu_capability(),
    )
    if rank == 0:
        print(
            f"done: world_size={world_size} global_step={global_step} wall={wall:.1f}s "
            f"(rollout {result['rollout_s']:.1f}s incl. first {result['first_rollout_s']:.1f}s, "
            f"update {result['update_s']:.1f}s) cpu={result['cpu_s']:.1f}s "
            f"mean_return(last {len(recent)})={result['mean_return']:.1f}"
        )
        if args.result_json:
            pathlib.Path(args.result_json).write_text(json.dumps(result, indent=1))
    envs.close()
    # DDP's reducer holds the process group: free it (and any cycle through it) while the
    # interpreter is whole, not in its finalization, where gloo's teardown can abort
    del ddp, optimizer, collector
    gc.collect()
    if dist.is_initialized():
        dist.barrier()  # no rank tears gloo down while another still talks to it
        dist.destroy_process_group()
    return result


if __name__ == "__main__":
    main()
