"""PPO (continuous actions) in CleanRL's single-file style, on a torch-native gpuvec env.

Follows CleanRL's ``ppo_continuous_action.py`` (same agent, losses, default
hyperparameters and wrapper stack: ClipAction, NormalizeObservation, observation clip,
NormalizeReward, reward clip); the changes are the env
(``gymnasium.make_vec("gpuvec/Pendulum-v1", ...)``, stepped as tensors on the training
device), the tensor versions of the wrappers from ``gpuvec_envs.adapters.cleanrl``, and a
loop that never leaves torch. ``--env-backend gymnasium`` runs the same loop on gymnasium's
``SyncVectorEnv`` with CleanRL's per-env numpy wrappers, seen as tensors through
``to_torch``.

CleanRL wraps *each* env in gymnasium's single-env wrappers, so the tensor
``NormalizeReward`` runs with ``per_env=True``: each env's discounted return runs on over
a truncation (Pendulum only truncates, at 200 steps) and has its own variance, exactly as
the per-env wrapper (gymnasium 0.29 and 1.x alike); gymnasium 1.x's *vector* wrapper would
restart the return at every episode end. ``NormalizeObservation`` keeps one statistic
over all envs, which equals CleanRL's per-env statistic for its default ``--num-envs 1``.

Run: ``python examples/cleanrl_ppo_continuous_action.py`` (Pendulum-v1, 1M steps).
"""

from __future__ import annotations

import argparse
import collections
import random
import time

import gymnasium as gym
import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim
from gymnasium.vector import AutoresetMode
from torch.distributions.normal import Normal

import gpuvec_envs  # noqa: F401  (registers gpuvec/...)
from gpuvec_envs.adapters.cleanrl import (
    ClipAction,
    FlattenObservation,
    NormalizeObservation,
    NormalizeReward,
    RecordEpisodeStatistics,
    TransformObservation,
    TransformReward,
    episode_stats,
    to_torch,
)
from gpuvec_envs.render.video import record_video


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    b = argparse.BooleanOptionalAction
    p.add_argument("--exp-name", default="cleanrl_ppo_continuous_action")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--torch-deterministic", action=b, default=True)
    p.add_argument("--cuda", action=b, default=True, help="use CUDA if available")
    p.add_argument(
        "--torch-threads",
        type=int,
        default=1,
        help="CPU threads of torch (small nets and batches: 1 is fastest)",
    )
    p.add_argument("--tensorboard", action=b, default=False, help="log to runs/ (needs it)")
    p.add_argument(
        "--capture-video",
        action=b,
        default=False,
        help="after training, record an episode of the agent to --video-dir/<run name>/",
    )
    p.add_argument("--video-dir", default="videos")
    p.add_argument("--env-id", default="Pendulum-v1", help="without the gpuvec/ namespace")
    p.add_argument("--env-backend", choices=("gpuvec", "gymnasium"), default="gpuvec")
    p.add_argument(
        "--step-backend",
        choices=("auto", "eager", "compile"),
        default="auto",
        help="gpuvec: run each env step eagerly or as one compiled graph",
    )
    p.add_argument("--total-timesteps", type=int, default=1000000)
    p.add_argument("--learning-rate", type=float, default=3e-4)
    p.add_argument("--num-envs", type=int, default=1)
    p.add_argument("--num-steps", type=int, default=2048)
    p.add_argument("--anneal-lr", action=b, default=True)
    p.add_argument("--gamma", type=float, default=0.99)
    p.add_argument("--gae-lambda", type=float, default=0.95)
    p.add_argument("--num-minibatches", type=int, default=32)
    p.add_argument("--update-epochs", type=int, default=10)
    p.add_argument("--norm-adv", action=b, default=True)
    p.add_argument("--clip-coef", type=float, default=0.2)
    p.add_argument("--clip-vloss", action=b, default=True)
    p.add_argument("--ent-coef", type=float, default=0.0)
    p.add_argument("--vf-coef", type=float, default=0.5)
    p.add_argument("--max-grad-norm", type=float, default=0.5)
    p.add_argument("--target-kl", type=float, default=None)
    p.add_argument(
        "--target-return",
        type=float,
        default=None,
        help="stop once the mean return of the last --return-window episodes reaches this",
    )
    p.add_argument("--return-window", type=int, default=20)
    p.add_argument("--quiet", action="store_true", help="print only the summary")
    args = p.parse_args(argv)
    args.batch_size = args.num_envs * args.num_steps
    args.minibatch_size = args.batch_size // args.num_minibatches
    args.num_iterations = args.total_timesteps // args.batch_size
    return args


def make_envs(args: argparse.Namespace, device: torch.device) -> gym.vector.VectorEnv:
    """CleanRL's wrapper stack as tensor wrappers; SAME_STEP autoreset, as CleanRL assumes."""
    if args.env_backend == "gpuvec":
        envs = gym.make_vec(
            f"gpuvec/{args.env_id}",
            num_envs=args.num_envs,
            device=device,
            autoreset_mode=AutoresetMode.SAME_STEP,
            backend=args.step_backend,
            validate=False,  # actions are clipped by ClipAction below
        )
        envs = FlattenObservation(envs)  # deal with dm_control's Dict observation space
        envs = RecordEpisodeStatistics(envs, buffer_length=args.return_window)
        envs = ClipAction(envs)
        envs = NormalizeObservation(envs)
        envs = TransformObservation(envs, lambda obs: torch.clamp(obs, -10, 10))
        envs = NormalizeReward(envs, gamma=args.gamma, per_env=True)  # as CleanRL: per env
        return TransformReward(envs, lambda reward: torch.clamp(reward, -10, 10))

    def wrap(env: gym.Env) -> gym.Env:  # CleanRL's per-env numpy wrappers
        env = gym.wrappers.FlattenObservation(env)
        env = gym.wrappers.RecordEpisodeStatistics(env)
        env = gym.wrappers.ClipAction(env)
        env = gym.wrappers.NormalizeObservation(env)
        env = gym.wrappers.TransformObservation(
            env, lambda obs: np.clip(obs, -10, 10), env.observation_space
        )
        env = gym.wrappers.NormalizeReward(env, gamma=args.gamma)
        return gym.wrappers.TransformReward(env, lambda reward: np.clip(reward, -10, 10))

    envs = gym.make_vec(
        args.env_id,
        num_envs=args.num_envs,
        vectorization_mode="sync",
        vector_kwargs={"autoreset_mode": AutoresetMode.SAME_STEP},
        wrappers=[wrap],
    )
    return to_torch(envs, device)


def layer_init(layer: nn.Linear, std: float = np.sqrt(2), bias_const: float = 0.0) -> nn.Linear:
    torch.nn.init.orthogonal_(layer.weight, std)
    torch.nn.init.constant_(layer.bias, bias_const)
    return layer


class Agent(nn.Module):
    def __init__(self, envs: gym.vector.VectorEnv) -> None:
        super().__init__()
        n_obs = int(np.prod(envs.single_observation_space.shape))
        n_act = int(np.prod(envs.single_action_space.shape))
        self.critic = nn.Sequential(
            layer_init(nn.Linear(n_obs, 64)),
            nn.Tanh(),
            layer_init(nn.Linear(64, 64)),
            nn.Tanh(),
            layer_init(nn.Linear(64, 1), std=1.0),
        )
        self.actor_mean = nn.Sequential(
            layer_init(nn.Linear(n_obs, 64)),
            nn.Tanh(),
            layer_init(nn.Linear(64, 64)),
            nn.Tanh(),
            layer_init(nn.Linear(64, n_act), std=0.01),
        )
        self.actor_logstd = nn.Parameter(torch.zeros(1, n_act))

    def get_value(self, x: torch.Tensor) -> torch.Tensor:
        return self.critic(x)

    def get_action_and_value(self, x: torch.Tensor, action: torch.Tensor | None = None):
        action_mean = self.actor_mean(x)
        action_logstd = self.actor_logstd.expand_as(action_mean)
        action_std = torch.exp(action_logstd)
        probs = Normal(action_mean, action_std)
        if action is None:
            action = probs.sample()
        return action, probs.log_prob(action).sum(1), probs.entropy().sum(1), self.critic(x)


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    run_name = (
        f"{args.env_id}__{args.exp_name}__{args.env_backend}__{args.seed}__{int(time.time())}"
    )
    writer = None
    if args.tensorboard:
        from torch.utils.tensorboard import SummaryWriter

        writer = SummaryWriter(f"runs/{run_name}")

    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    torch.backends.cudnn.deterministic = args.torch_deterministic
    torch.set_num_threads(args.torch_threads)
    device = torch.device("cuda" if torch.cuda.is_available() and args.cuda else "cpu")

    envs = make_envs(args, device)
    assert isinstance(envs.single_action_space, gym.spaces.Box), "continuous actions only"
    agent = Agent(envs).to(device)
    optimizer = optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5)

    obs_shape = envs.single_observation_space.shape
    obs = torch.zeros((args.num_steps, args.num_envs) + obs_shape, device=device)
    act_shape = envs.single_action_space.shape
    actions = torch.zeros((args.num_steps, args.num_envs) + act_shape, device=device)
    logprobs = torch.zeros((args.num_steps, args.num_envs), device=device)
    rewards = torch.zeros((args.num_steps, args.num_envs), device=device)
    dones = torch.zeros((args.num_steps, args.num_envs), device=device)
    values = torch.zeros((args.num_steps, args.num_envs), device=device)
    # episode statistics, read back to the host once per iteration
    ep_returns = torch.zeros((args.num_steps, args.num_envs), device=device)
    ep_lengths = torch.zeros((args.num_steps, args.num_envs), dtype=torch.int64, device=device)
    ep_mask = torch.zeros((args.num_steps, args.num_envs), dtype=torch.bool, device=device)
    recent = collections.deque(maxlen=args.return_window)

    global_step = 0
    start_time = time.time()
    start_cpu = time.process_time()  # CPU time of this process: robust to a loaded machine
    next_obs, _ = envs.reset(seed=args.seed)
    next_obs = next_obs.to(torch.float32)
    next_done = torch.zeros(args.num_envs, device=device)
    result = {"reached_at_step": None, "reached_at_s": None, "episodes": 0}
    result.update(rollout_cpu_s=0.0, update_cpu_s=0.0)  # CPU time of the two phases
    for iteration in range(1, args.num_iterations + 1):
        if args.anneal_lr:
            frac = 1.0 - (iteration - 1.0) / args.num_iterations
            optimizer.param_groups[0]["lr"] = frac * args.learning_rate

        ep_mask.zero_()
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

            t_step = time.process_time()
            next_obs, reward, terminations, truncations, infos = envs.step(action)
            if global_step == args.num_envs:  # the first step compiles the gpuvec step function
                result["first_step_cpu_s"] = time.process_time() - t_step
            next_obs = next_obs.to(torch.float32)
            next_done = (terminations | truncations).to(torch.float32)
            rewards[step] = reward.view(-1)
            stats = episode_stats(infos)
            if stats is not None:  # gpuvec: always (masked); gymnasium: on endings only
                ep_returns[step], ep_lengths[step], ep_mask[step] = stats

        # one host read per iteration: the episodes that ended during the rollout
        ended = ep_returns[ep_mask].tolist()
        t_update = time.process_time()
        result["rollout_cpu_s"] += t_update - t_rollout
        ended_lengths = ep_lengths[ep_mask].tolist()
        recent.extend(ended)
        result["episodes"] += len(ended)
        if writer is not None:
            for r, ell in zip(ended, ended_lengths, strict=True):
                writer.add_scalar("charts/episodic_return", r, global_step)
                writer.add_scalar("charts/episodic_length", ell, global_step)

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
        b_actions = actions.reshape((-1,) + act_shape)
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
        elapsed = time.time() - start_time
        sps = int(global_step / elapsed)
        mean_recent = float(np.mean(recent)) if recent else float("nan")
        if writer is not None:
            y_pred, y_true = b_values.cpu().numpy(), b_returns.cpu().numpy()
            var_y = np.var(y_true)
            explained_var = np.nan if var_y == 0 else 1 - np.var(y_true - y_pred) / var_y
            writer.add_scalar("charts/learning_rate", optimizer.param_groups[0]["lr"], global_step)
            writer.add_scalar("losses/value_loss", v_loss.item(), global_step)
            writer.add_scalar("losses/policy_loss", pg_loss.item(), global_step)
            writer.add_scalar("losses/entropy", entropy_loss.item(), global_step)
            writer.add_scalar("losses/old_approx_kl", old_approx_kl.item(), global_step)
            writer.add_scalar("losses/approx_kl", approx_kl.item(), global_step)
            writer.add_scalar("losses/clipfrac", torch.stack(clipfracs).mean().item(), global_step)
            writer.add_scalar("losses/explained_variance", explained_var, global_step)
            writer.add_scalar("charts/SPS", sps, global_step)
        if not args.quiet and (iteration % 10 == 0 or iteration == args.num_iterations):
            print(
                f"global_step={global_step} mean_return(last {len(recent)})={mean_recent:.1f} "
                f"SPS={sps}"
            )
        if (
            args.target_return is not None
            and len(recent) == recent.maxlen
            and mean_recent >= args.target_return
        ):
            cpu = time.process_time() - start_cpu
            result.update(reached_at_step=global_step, reached_at_s=elapsed, reached_at_cpu_s=cpu)
            print(
                f"reached mean return {mean_recent:.1f} at global_step={global_step} "
                f"after {elapsed:.1f} s wall, {cpu:.1f} s CPU"
            )
            break

    result.update(
        global_step=global_step,
        wall_s=time.time() - start_time,
        cpu_s=time.process_time() - start_cpu,
        mean_return=float(np.mean(recent)) if recent else float("nan"),
        env_backend=args.env_backend,
    )
    print(
        f"done: env_backend={args.env_backend} global_step={global_step} "
        f"wall={result['wall_s']:.1f}s cpu={result['cpu_s']:.1f}s "
        f"mean_return(last {len(recent)})={result['mean_return']:.1f} "
        f"(CPU s: rollout {result['rollout_cpu_s']:.1f}, update {result['update_cpu_s']:.1f}, "
        f"first env step {result.get('first_step_cpu_s', 0.0):.1f})"
    )
    if args.capture_video and args.env_backend == "gpuvec":
        norm = envs  # the agent sees observations normalised by the training statistics
        while not isinstance(norm, NormalizeObservation):
            norm = norm.env
        rms = norm.obs_rms

        def policy(obs: torch.Tensor) -> torch.Tensor:  # the mean action
            x = ((obs - rms.mean) / torch.sqrt(rms.var + norm.epsilon)).to(torch.float32)
            return agent.actor_mean(torch.clamp(x, -10, 10))

        result["videos"] = record_video(
            args.env_id, policy, f"{args.video_dir}/{run_name}", seed=args.seed, device=device
        )
    envs.close()
    if writer is not None:
        writer.close()
    return result


if __name__ == "__main__":
    main()
