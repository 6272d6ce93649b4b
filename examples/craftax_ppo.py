"""PPO (discrete actions, MLP) in CleanRL's single-file style, on gpuvec Craftax-Classic.

Same loop as ``examples/minatar_ppo.py`` (CleanRL's ``ppo.py``: losses, GAE, clipping,
minibatches), with the changes Craftax-Classic needs:

* the env is ``gymnasium.make_vec("gpuvec/Craftax-Classic-Symbolic-v1", ...)``: a batch of
  64 x 64 Crafter worlds stepped as torch tensors; observations are ``(N, 1345)`` float32;
* the agent is craftax's own PPO network (Craftax_Baselines ``models/actor_critic.py``,
  ``ActorCritic``): separate actor and critic MLPs of three ``--layer-size`` (512) tanh
  layers each, orthogonal init;
* hyperparameters are Craftax_Baselines ``ppo.py``'s (lr 2e-4 annealed, 64 steps, gamma
  0.99, GAE 0.8, 4 epochs, 8 minibatches, entropy 0.01, clip 0.2, max grad norm 1.0), except
  the number of envs: 128 here (craftax uses 1024), so that a CPU run of a few hundred
  thousand steps still makes enough updates (``--num-envs 1024`` on a GPU);
* the score: at each episode's end the env puts its 22 achievement flags in
  ``info["achievements"]`` (mask ``info["_achievements"]``). The script keeps the flags of
  the last ``--episode-window`` episodes that ended and reports each achievement's success
  rate (the fraction of those episodes that unlocked it) and the Craftax score
  (``craftax_score``: ``exp(mean(log(1 + 100 r))) - 1``), as craftax's PPO logs the
  achievements of its returned episodes, and the same over every episode that ended in the
  run (``success_rates_all``, Crafter's protocol). Only ended episodes count (an episode lasts until
  the player dies, or 10,000 steps); the JSON also holds the achievements that the episodes
  still running at the end had unlocked so far (``running_rates``).

``--random`` runs a uniform-random policy through the same loop and reporting instead of
PPO (the baseline); ``--baseline random.json`` puts that run's rates beside PPO's in the
summary table. ``--time-budget`` stops after that many seconds of wall time (the learning
rate then anneals over whichever of the step and time budgets runs out first).

The env step runs eagerly (the ID's default backend): compiling Craftax's step takes tens of
minutes on a CPU.

Run::

    python examples/craftax_ppo.py --random --time-budget 900 --episode-window 0 --json random.json
    python examples/craftax_ppo.py --time-budget 900 --baseline random.json --json ppo.json

In 15 minutes on 2 shared CPU cores (one thread, eager env step) PPO ran 0.2-0.4M steps and
beat the random policy on 9 of the 22 achievements, Craftax score 3.7-4.3 % against 1.8 %
(docs/craftax.md, "Learning").
"""

from __future__ import annotations

import argparse
import collections
import json
import math
import os
import random
import time
from typing import Any

import gymnasium as gym
import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim
from gymnasium.vector import AutoresetMode
from torch.distributions.categorical import Categorical

import gpuvec_envs  # noqa: F401  (registers gpuvec/...)
from gpuvec_envs.adapters.cleanrl import RecordEpisodeStatistics, episode_stats
from gpuvec_envs.envs.craftax.classic import ACHIEVEMENTS, craftax_score, success_rates

ENV_ID = "Craftax-Classic-Symbolic-v1"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    b = argparse.BooleanOptionalAction
    p.add_argument("--exp-name", default="craftax_ppo")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--torch-deterministic", action=b, default=True)
    p.add_argument("--cuda", action=b, default=True, help="use CUDA if available")
    p.add_argument(
        "--torch-threads",
        type=int,
        default=1,
        help="CPU threads of torch (the eager env step and small batches: 1 is fastest)",
    )
    p.add_argument("--tensorboard", action=b, default=False, help="log to runs/ (needs it)")
    p.add_argument(
        "--step-backend",
        choices=("auto", "eager", "compile"),
        default="eager",
        help="run each env step eagerly or as one compiled graph (tens of minutes on CPU)",
    )
    p.add_argument("--random", action="store_true", help="uniform-random policy, no learning")
    p.add_argument("--total-timesteps", type=int, default=1000000)
    p.add_argument(
        "--time-budget", type=float, default=None, help="stop after this many seconds (wall)"
    )
    p.add_argument("--learning-rate", type=float, default=2e-4)
    p.add_argument("--num-envs", type=int, default=128)
    p.add_argument("--num-steps", type=int, default=64)
    p.add_argument("--anneal-lr", action=b, default=True)
    p.add_argument("--gamma", type=float, default=0.99)
    p.add_argument("--gae-lambda", type=float, default=0.8)
    p.add_argument("--num-minibatches", type=int, default=8)
    p.add_argument("--update-epochs", type=int, default=4)
    p.add_argument("--norm-adv", action=b, default=True)
    p.add_argument("--clip-coef", type=float, default=0.2)
    p.add_argument("--clip-vloss", action=b, default=True)
    p.add_argument("--ent-coef", type=float, default=0.01)
    p.add_argument("--vf-coef", type=float, default=0.5)
    p.add_argument("--max-grad-norm", type=float, default=1.0)
    p.add_argument("--target-kl", type=float, default=None)
    p.add_argument("--layer-size", type=int, default=512)
    p.add_argument(
        "--episode-window",
        type=int,
        default=500,
        help="success rates over the last this many ended episodes (0: all of them)",
    )
    p.add_argument("--baseline", default=None, help="JSON of a --random run: adds its column")
    p.add_argument("--json", default=None, help="write the result (rates, score, run) here")
    p.add_argument("--quiet", action="store_true", help="print only the summary")
    args = p.parse_args(argv)
    args.batch_size = args.num_envs * args.num_steps
    args.minibatch_size = args.batch_size // args.num_minibatches
    args.num_iterations = args.total_timesteps // args.batch_size
    if args.num_iterations < 1:
        p.error(
            f"--total-timesteps {args.total_timesteps} is below one rollout ({args.batch_size})"
        )
    return args


def make_envs(args: argparse.Namespace, device: torch.device) -> gym.vector.VectorEnv:
    """A tensor vector env with episode statistics; SAME_STEP autoreset, as CleanRL assumes."""
    envs = gym.make_vec(
        f"gpuvec/{ENV_ID}",
        num_envs=args.num_envs,
        device=device,
        autoreset_mode=AutoresetMode.SAME_STEP,
        backend=args.step_backend,
        validate=False,  # sampled actions are valid; skip the per-step range check
    )
    return RecordEpisodeStatistics(envs, buffer_length=100)


def layer_init(layer: nn.Module, std: float = np.sqrt(2), bias_const: float = 0.0) -> nn.Module:
    torch.nn.init.orthogonal_(layer.weight, std)
    torch.nn.init.constant_(layer.bias, bias_const)
    return layer


def mlp(n_in: int, width: int, n_out: int, out_std: float) -> nn.Sequential:
    """Three ``width`` tanh layers and a linear output (craftax's ``ActorCritic`` branch)."""
    return nn.Sequential(
        layer_init(nn.Linear(n_in, width)),
        nn.Tanh(),
        layer_init(nn.Linear(width, width)),
        nn.Tanh(),
        layer_init(nn.Linear(width, width)),
        nn.Tanh(),
        layer_init(nn.Linear(width, n_out), std=out_std),
    )


class Agent(nn.Module):
    """craftax's symbolic PPO network: separate actor and critic MLPs (3 x 512 tanh each)."""

    def __init__(self, envs: gym.vector.VectorEnv, layer_size: int = 512) -> None:
        super().__init__()
        n_obs = int(np.prod(envs.single_observation_space.shape))
        self.actor = mlp(n_obs, layer_size, envs.single_action_space.n, out_std=0.01)
        self.critic = mlp(n_obs, layer_size, 1, out_std=1.0)

    def get_value(self, obs: torch.Tensor) -> torch.Tensor:
        """Values (B, 1) of observations (B, 1345) float32."""
        return self.critic(obs)

    def get_action_and_value(
        self, obs: torch.Tensor, action: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """Action (B,), its log-probability (B,), the entropy (B,) and the value (B, 1)."""
        probs = Categorical(logits=self.actor(obs))
        if action is None:
            action = probs.sample()
        return action, probs.log_prob(action), probs.entropy(), self.critic(obs)


class EpisodeLog:
    """Achievements, returns and lengths of the episodes that end, read back once per rollout.

    Each step's info is stored into (num_steps, N) device buffers; :meth:`flush` copies the
    rows of the episodes that ended to the host and keeps the last ``window`` of them
    (``window=0``: all).
    """

    def __init__(self, num_steps: int, num_envs: int, device: torch.device, window: int) -> None:
        shape = (num_steps, num_envs)
        self.achievements = torch.zeros(shape + (len(ACHIEVEMENTS),), dtype=torch.bool)
        self.achievements = self.achievements.to(device)
        self.returns = torch.zeros(shape, dtype=torch.float64, device=device)
        self.lengths = torch.zeros(shape, dtype=torch.int64, device=device)
        self.mask = torch.zeros(shape, dtype=torch.bool, device=device)
        maxlen = window or None
        self.rows: collections.deque[torch.Tensor] = collections.deque(maxlen=maxlen)
        self.recent_returns: collections.deque[float] = collections.deque(maxlen=maxlen)
        self.recent_lengths: collections.deque[int] = collections.deque(maxlen=maxlen)
        self.episodes = 0
        self.counts = torch.zeros(len(ACHIEVEMENTS), dtype=torch.int64)  # over all episodes

    def record(self, t: int, info: dict[str, Any]) -> None:
        """Store step ``t``'s info (no host sync)."""
        self.achievements[t] = info["achievements"]
        self.returns[t], self.lengths[t], self.mask[t] = episode_stats(info)

    def flush(self) -> int:
        """Move the ended episodes of the rollout to the host; returns how many ended."""
        rows = self.achievements[self.mask].cpu()
        self.rows.extend(rows.unbind(0))
        self.recent_returns.extend(self.returns[self.mask].tolist())
        self.recent_lengths.extend(self.lengths[self.mask].tolist())
        self.mask.zero_()
        self.episodes += rows.shape[0]
        self.counts += rows.sum(0)
        return rows.shape[0]

    def summary(self) -> dict[str, Any]:
        """Success rates, Craftax score, mean return and length over the window.

        ``success_rates_all`` and ``craftax_score_all`` count every episode that ended in
        the run (Crafter's protocol: all training episodes within the step budget).
        """
        out: dict[str, Any] = {"episodes_total": self.episodes, "episodes": len(self.rows)}
        out.update(success_rates_all=None, craftax_score_all=None)
        if self.episodes:
            rates_all = self.counts.to(torch.float64) / self.episodes
            out["success_rates_all"] = dict(zip(ACHIEVEMENTS, rates_all.tolist(), strict=True))
            out["craftax_score_all"] = craftax_score(rates_all)
        if self.rows:
            rates = success_rates(torch.stack(list(self.rows)))
            out["success_rates"] = dict(zip(ACHIEVEMENTS, rates.tolist(), strict=True))
            out["craftax_score"] = craftax_score(rates)
            out["mean_return"] = float(np.mean(self.recent_returns))
            out["mean_length"] = float(np.mean(self.recent_lengths))
        else:
            out.update(success_rates=None, craftax_score=None, mean_return=None, mean_length=None)
        return out


def running_rates(envs: gym.vector.VectorEnv) -> dict[str, Any]:
    """Achievements unlocked so far by the episodes still running (fraction of the N envs)."""
    shell = envs.unwrapped.state
    ach = shell.env.achievements.to(torch.float64).mean(0)
    return {
        "running_rates": dict(zip(ACHIEVEMENTS, ach.tolist(), strict=True)),
        "running_mean_length": float(shell.elapsed.to(torch.float64).mean()),
    }


def machine_info(device: torch.device) -> dict[str, Any]:
    """Device, ISA, threads and 1-minute load, to go with every figure."""
    return {
        "device": str(device),
        "isa": torch.backends.cpu.get_cpu_capability(),
        "torch_threads": torch.get_num_threads(),
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
        "torch": torch.__version__,
        "load_start": os.getloadavg()[0],
    }


def progress(args: argparse.Namespace, iteration: int, start_time: float) -> float:
    """Fraction of the run done: steps, or wall time if ``--time-budget`` runs out sooner."""
    frac = (iteration - 1.0) / args.num_iterations
    if args.time_budget is not None:
        frac = max(frac, (time.time() - start_time) / args.time_budget)
    return min(frac, 1.0)


def out_of_time(args: argparse.Namespace, start_time: float) -> bool:
    return args.time_budget is not None and time.time() - start_time >= args.time_budget


def run_random(args: argparse.Namespace, device: torch.device) -> dict[str, Any]:
    """The uniform-random baseline: the same env, loop and reporting, no learning."""
    envs = make_envs(args, device)
    log = EpisodeLog(args.num_steps, args.num_envs, device, args.episode_window)
    gen = torch.Generator(device=device).manual_seed(args.seed)
    n_actions = envs.single_action_space.n
    result: dict[str, Any] = {"mode": "random", "history": []}
    start_time, start_cpu = time.time(), time.process_time()
    envs.reset(seed=args.seed)
    result["reset_s"] = time.time() - start_time
    global_step = 0
    for iteration in range(1, args.num_iterations + 1):
        for step in range(args.num_steps):
            global_step += args.num_envs
            action = torch.randint(0, n_actions, (args.num_envs,), generator=gen, device=device)
            _, _, _, _, infos = envs.step(action)
            log.record(step, infos)
        log.flush()
        report_iteration(args, iteration, global_step, start_time, log, result)
        if out_of_time(args, start_time):
            break
    result.update(finish(envs, log, global_step, start_time, start_cpu))
    envs.close()
    return result


def report_iteration(
    args: argparse.Namespace,
    iteration: int,
    global_step: int,
    start_time: float,
    log: EpisodeLog,
    result: dict[str, Any],
    extra: str = "",
) -> None:
    """Append (step, episodes, score) to the history; print every 10 iterations."""
    summary = log.summary()
    score = summary["craftax_score"]
    result["history"].append((global_step, log.episodes, score))
    if not args.quiet and (iteration % 10 == 0 or iteration == args.num_iterations):
        elapsed = time.time() - start_time
        score_s = "n/a" if score is None else f"{score:.2f}"
        ret_s = "n/a" if summary["mean_return"] is None else f"{summary['mean_return']:.2f}"
        print(
            f"global_step={global_step} episodes={log.episodes} "
            f"mean_return(last {summary['episodes']})={ret_s} score={score_s}{extra} "
            f"SPS={int(global_step / elapsed)} load={os.getloadavg()[0]:.1f}",
            flush=True,
        )


def finish(
    envs: gym.vector.VectorEnv, log: EpisodeLog, global_step: int, start_time: float, cpu0: float
) -> dict[str, Any]:
    """The end-of-run figures: steps, times, load, rates of ended and running episodes."""
    out = {
        "global_step": global_step,
        "wall_s": time.time() - start_time,
        "cpu_s": time.process_time() - cpu0,
        "load_end": os.getloadavg()[0],
    }
    out.update(log.summary())
    out.update(running_rates(envs))
    return out


def run_ppo(args: argparse.Namespace, device: torch.device) -> dict[str, Any]:
    """CleanRL's PPO loop with craftax's network and hyperparameters."""
    writer = None
    if args.tensorboard:
        from torch.utils.tensorboard import SummaryWriter

        writer = SummaryWriter(f"runs/{ENV_ID}__{args.exp_name}__{args.seed}__{int(time.time())}")

    envs = make_envs(args, device)
    assert isinstance(envs.single_action_space, gym.spaces.Discrete), "discrete actions only"
    agent = Agent(envs, args.layer_size).to(device)
    optimizer = optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5)

    obs_shape = envs.single_observation_space.shape
    obs = torch.zeros((args.num_steps, args.num_envs) + obs_shape, device=device)
    actions = torch.zeros((args.num_steps, args.num_envs), dtype=torch.int64, device=device)
    logprobs = torch.zeros((args.num_steps, args.num_envs), device=device)
    rewards = torch.zeros((args.num_steps, args.num_envs), device=device)
    dones = torch.zeros((args.num_steps, args.num_envs), device=device)
    values = torch.zeros((args.num_steps, args.num_envs), device=device)
    log = EpisodeLog(args.num_steps, args.num_envs, device, args.episode_window)

    result: dict[str, Any] = {"mode": "ppo", "history": []}
    result.update(rollout_cpu_s=0.0, update_cpu_s=0.0)  # CPU time of the two phases
    global_step = 0
    start_time = time.time()
    start_cpu = time.process_time()  # CPU time of this process: robust to a loaded machine
    next_obs, _ = envs.reset(seed=args.seed)
    result["reset_s"] = time.time() - start_time
    next_done = torch.zeros(args.num_envs, device=device)
    for iteration in range(1, args.num_iterations + 1):
        if args.anneal_lr:
            frac = 1.0 - progress(args, iteration, start_time)
            optimizer.param_groups[0]["lr"] = frac * args.learning_rate

        t_rollout = time.process_time()
        for step in range(args.num_steps):
            global_step += args.num_envs
            obs[step] = next_obs
            dones[step] = next_done
            with torch.no_grad():
                action, logprob, _, value = agent.get_action_and_value(next_obs)
                values[step] = value.flatten()
            actions[step] = action
            logprobs[step] = logprob

            next_obs, reward, terminations, truncations, infos = envs.step(action)
            next_done = (terminations | truncations).to(torch.float32)
            rewards[step] = reward.view(-1)
            log.record(step, infos)

        t_update = time.process_time()
        result["rollout_cpu_s"] += t_update - t_rollout
        log.flush()  # one host read per iteration: the episodes that ended

        # bootstrap value if not done
        with torch.no_grad():
            next_value = agent.get_value(next_obs).reshape(1, -1)
            advantages = torch.zeros_like(rewards)
            lastgaelam = 0
            for t in reversed(range(args.num_steps)):
                if t == args.num_steps - 1:
                    nextnonterminal = 1.0 - next_done
                    nextvalues = next_value
                else:
                    nextnonterminal = 1.0 - dones[t + 1]
                    nextvalues = values[t + 1]
                delta = rewards[t] + args.gamma * nextvalues * nextnonterminal - values[t]
                advantages[t] = lastgaelam = (
                    delta + args.gamma * args.gae_lambda * nextnonterminal * lastgaelam
                )
            returns = advantages + values

        # flatten the batch
        b_obs = obs.reshape((-1,) + obs_shape)
        b_logprobs = logprobs.reshape(-1)
        b_actions = actions.reshape(-1)
        b_advantages = advantages.reshape(-1)
        b_returns = returns.reshape(-1)
        b_values = values.reshape(-1)

        # optimizing the policy and value network
        b_inds = np.arange(args.batch_size)
        clipfracs = []
        for _epoch in range(args.update_epochs):
            np.random.shuffle(b_inds)
            for start in range(0, args.batch_size, args.minibatch_size):
                end = start + args.minibatch_size
                mb_inds = torch.from_numpy(b_inds[start:end]).to(device)

                _, newlogprob, entropy, newvalue = agent.get_action_and_value(
                    b_obs[mb_inds], b_actions[mb_inds]
                )
                logratio = newlogprob - b_logprobs[mb_inds]
                ratio = logratio.exp()

                with torch.no_grad():
                    # calculate approx_kl http://joschu.net/blog/kl-approx.html
                    old_approx_kl = (-logratio).mean()
                    approx_kl = ((ratio - 1) - logratio).mean()
                    clipfracs.append(((ratio - 1.0).abs() > args.clip_coef).float().mean())

                mb_advantages = b_advantages[mb_inds]
                if args.norm_adv:
                    mb_advantages = (mb_advantages - mb_advantages.mean()) / (
                        mb_advantages.std() + 1e-8
                    )

                # policy loss
                pg_loss1 = -mb_advantages * ratio
                pg_loss2 = -mb_advantages * torch.clamp(
                    ratio, 1 - args.clip_coef, 1 + args.clip_coef
                )
                pg_loss = torch.max(pg_loss1, pg_loss2).mean()

                # value loss
                newvalue = newvalue.view(-1)
                if args.clip_vloss:
                    v_loss_unclipped = (newvalue - b_returns[mb_inds]) ** 2
                    v_clipped = b_values[mb_inds] + torch.clamp(
                        newvalue - b_values[mb_inds], -args.clip_coef, args.clip_coef
                    )
                    v_loss_clipped = (v_clipped - b_returns[mb_inds]) ** 2
                    v_loss = 0.5 * torch.max(v_loss_unclipped, v_loss_clipped).mean()
                else:
                    v_loss = 0.5 * ((newvalue - b_returns[mb_inds]) ** 2).mean()

                entropy_loss = entropy.mean()
                loss = pg_loss - args.ent_coef * entropy_loss + v_loss * args.vf_coef

                optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
                optimizer.step()

            if args.target_kl is not None and float(approx_kl) > args.target_kl:
                break

        result["update_cpu_s"] += time.process_time() - t_update
        losses = {
            "loss": loss.item(),
            "policy_loss": pg_loss.item(),
            "value_loss": v_loss.item(),
            "entropy": entropy_loss.item(),
            "approx_kl": approx_kl.item(),
        }
        result["losses"] = losses
        if writer is not None:
            writer.add_scalar("charts/learning_rate", optimizer.param_groups[0]["lr"], global_step)
            for k, v in losses.items():
                writer.add_scalar(f"losses/{k}", v, global_step)
            writer.add_scalar("losses/old_approx_kl", old_approx_kl.item(), global_step)
            writer.add_scalar("losses/clipfrac", torch.stack(clipfracs).mean().item(), global_step)
            summary = log.summary()
            if summary["craftax_score"] is not None:
                writer.add_scalar("charts/craftax_score", summary["craftax_score"], global_step)
                writer.add_scalar("charts/episodic_return", summary["mean_return"], global_step)
        report_iteration(
            args,
            iteration,
            global_step,
            start_time,
            log,
            result,
            f" entropy={losses['entropy']:.3f}",
        )
        if out_of_time(args, start_time):
            break

    result.update(finish(envs, log, global_step, start_time, start_cpu))
    envs.close()
    if writer is not None:
        writer.close()
    return result


def summary_table(result: dict[str, Any], baseline: dict[str, Any] | None = None) -> str:
    """A text table: achievement and success rates [%] of this run and of the baseline.

    Columns: the last ``--episode-window`` episodes of the run (``last``), every episode of
    a PPO run (``all``, Crafter's protocol), and the baseline's rates if given. ``z`` is the
    two-proportion z-statistic of ``last`` against the baseline (pooled standard error);
    ``z > 2`` marks a rate clearly above the baseline's.
    """
    mode = result["mode"]
    cols = [(f"{mode} last", result["success_rates"], result["craftax_score"], result["episodes"])]
    if mode == "ppo":
        cols.append(
            (
                "ppo all",
                result["success_rates_all"],
                result["craftax_score_all"],
                result["episodes_total"],
            )
        )
    if baseline is not None:
        b = (baseline["success_rates"], baseline["craftax_score"], baseline["episodes"])
        cols.append((baseline["mode"], *b))
    width = 11
    lines = [f"{'achievement':<22}" + "".join(f"{c[0]:>{width}}" for c in cols)]
    if baseline is not None:
        lines[0] += f"{'z':>7}"
    for name in ACHIEVEMENTS:
        rates = [None if c[1] is None else c[1][name] for c in cols]
        line = f"{name:<22}" + "".join(
            f"{'n/a':>{width}}" if r is None else f"{100 * r:>{width - 1}.1f}%" for r in rates
        )
        if baseline is not None:
            z = z_score(rates[0], cols[0][3], rates[-1], cols[-1][3])
            line += f"{'':>7}" if z is None else f"{z:>7.1f}"
        lines.append(line)
    lines.append(
        f"{'craftax score [%]':<22}"
        + "".join(f"{'n/a':>{width}}" if c[2] is None else f"{c[2]:>{width}.2f}" for c in cols)
    )
    lines.append(f"{'episodes':<22}" + "".join(f"{c[3]:>{width}}" for c in cols))
    runs = [result] + (["-"] if mode == "ppo" else []) + ([baseline] if baseline else [])
    for key, label, spec in (
        ("mean_return", "mean return", ".2f"),
        ("mean_length", "mean length", ".0f"),
        ("global_step", "env steps", "d"),
    ):
        vals = [run if run == "-" else run[key] for run in runs]  # "-": not kept for "all"
        lines.append(
            f"{label:<22}"
            + "".join(
                f"{'n/a' if v is None else v:>{width}}"
                if v in (None, "-")
                else f"{v:>{width}{spec}}"
                for v in vals
            )
        )
    return "\n".join(lines)


def z_score(p1: float | None, n1: int, p2: float | None, n2: int) -> float | None:
    """Two-proportion z-statistic of ``p1 - p2`` (pooled), or None if undefined."""
    if p1 is None or p2 is None or n1 == 0 or n2 == 0:
        return None
    pooled = (p1 * n1 + p2 * n2) / (n1 + n2)
    se = math.sqrt(pooled * (1 - pooled) * (1 / n1 + 1 / n2))
    return None if se == 0 else (p1 - p2) / se


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    torch.backends.cudnn.deterministic = args.torch_deterministic
    torch.set_num_threads(args.torch_threads)
    device = torch.device("cuda" if torch.cuda.is_available() and args.cuda else "cpu")

    info = machine_info(device)
    result = run_random(args, device) if args.random else run_ppo(args, device)
    result.update(info, args=dict(vars(args)))
    baseline = None
    if args.baseline is not None:
        with open(args.baseline) as f:
            baseline = json.load(f)
        result["baseline"] = args.baseline
    print(
        f"done: mode={result['mode']} seed={args.seed} num_envs={args.num_envs} "
        f"global_step={result['global_step']} wall={result['wall_s']:.1f}s "
        f"cpu={result['cpu_s']:.1f}s (reset {result['reset_s']:.1f}s) "
        f"episodes={result['episodes_total']} isa={info['isa']} threads={info['torch_threads']} "
        f"load={info['load_start']:.1f}->{result['load_end']:.1f}"
    )
    if result["mode"] == "ppo":
        print(
            f"CPU s: rollout {result['rollout_cpu_s']:.1f} (policy + env step), "
            f"update {result['update_cpu_s']:.1f}"
        )
    print(summary_table(result, baseline))
    if args.json is not None:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    return result


if __name__ == "__main__":
    main()
