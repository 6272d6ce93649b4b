"""PPO (discrete actions, CNN) in CleanRL's single-file style, on a batched gpuvec MiniGrid world.

Same loop as ``examples/minatar_ppo.py`` (CleanRL's ``ppo.py``: losses, GAE, clipping,
minibatches), with the changes MiniGrid needs:

* the env is ``gymnasium.make_vec("gpuvec/MiniGrid-DoorKey-5x5-v0", ...)`` (any
  ``--env-id MiniGrid-<Name>-v0``): a batch of grid worlds stepped as torch tensors;
* observations are the agent's ``(N, 7, 7, 3)`` **uint8, channels-last** view (object,
  colour, state ids, as minigrid's ``ImgObsWrapper``); the agent makes them channels-first
  floats with ``obs.permute(0, 3, 1, 2).float()``;
* the agent is the CNN of the minigrid RL starter files: ``Conv2d(3, 16, 2)`` + ReLU +
  ``MaxPool2d(2)`` + ``Conv2d(16, 32, 2)`` + ReLU + ``Conv2d(32, 64, 2)`` + ReLU (64
  features for a 7x7 view), shared by a policy head and a value head (64 hidden units each);
* hyperparameters: lr 2.5e-4 annealed, 64 envs x 128 steps, gamma 0.99, GAE 0.95,
  4 epochs, 4 minibatches, entropy 0.01, clip 0.2.

The env step runs eagerly by default (``--step-backend eager``): at 64 envs an eager step
costs milliseconds and compiling it costs a minute on a 2-core CPU; on a GPU or with many
envs use ``--step-backend compile``.

Run: ``python examples/minigrid_ppo.py --target-return 0.9`` (stops at a mean episodic
return of 0.9 over the last 100 episodes and prints the steps and time it took).
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
from torch.distributions.categorical import Categorical

import gpuvec_envs  # noqa: F401  (registers gpuvec/...)
from gpuvec_envs.adapters.cleanrl import RecordEpisodeStatistics, episode_stats
from gpuvec_envs.render.video import record_video


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    b = argparse.BooleanOptionalAction
    p.add_argument("--exp-name", default="minigrid_ppo")
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
    p.add_argument(
        "--env-id", default="MiniGrid-DoorKey-5x5-v0", help="without the gpuvec/ namespace"
    )
    p.add_argument(
        "--step-backend",
        choices=("auto", "eager", "compile"),
        default="eager",
        help="run each env step eagerly or as one compiled graph (a minute to compile on CPU)",
    )
    p.add_argument("--total-timesteps", type=int, default=1000000)
    p.add_argument("--learning-rate", type=float, default=2.5e-4)
    p.add_argument("--num-envs", type=int, default=64)
    p.add_argument("--num-steps", type=int, default=128)
    p.add_argument("--anneal-lr", action=b, default=True)
    p.add_argument("--gamma", type=float, default=0.99)
    p.add_argument("--gae-lambda", type=float, default=0.95)
    p.add_argument("--num-minibatches", type=int, default=4)
    p.add_argument("--update-epochs", type=int, default=4)
    p.add_argument("--norm-adv", action=b, default=True)
    p.add_argument("--clip-coef", type=float, default=0.2)
    p.add_argument("--clip-vloss", action=b, default=True)
    p.add_argument("--ent-coef", type=float, default=0.01)
    p.add_argument("--vf-coef", type=float, default=0.5)
    p.add_argument("--max-grad-norm", type=float, default=0.5)
    p.add_argument("--target-kl", type=float, default=None)
    p.add_argument(
        "--target-return",
        type=float,
        default=None,
        help="stop once the mean return of the last --return-window episodes reaches this",
    )
    p.add_argument("--return-window", type=int, default=100)
    p.add_argument("--quiet", action="store_true", help="print only the summary")
    args = p.parse_args(argv)
    args.batch_size = args.num_envs * args.num_steps
    args.minibatch_size = args.batch_size // args.num_minibatches
    args.num_iterations = args.total_timesteps // args.batch_size
    return args


def make_envs(args: argparse.Namespace, device: torch.device) -> gym.vector.VectorEnv:
    """A tensor vector env with episode statistics; SAME_STEP autoreset, as CleanRL assumes."""
    envs = gym.make_vec(
        f"gpuvec/{args.env_id}",
        num_envs=args.num_envs,
        device=device,
        autoreset_mode=AutoresetMode.SAME_STEP,
        backend=args.step_backend,
        validate=False,  # sampled actions are valid; skip the per-step range check
    )
    return RecordEpisodeStatistics(envs, buffer_length=args.return_window)


def layer_init(layer: nn.Module, std: float = np.sqrt(2), bias_const: float = 0.0) -> nn.Module:
    torch.nn.init.orthogonal_(layer.weight, std)
    torch.nn.init.constant_(layer.bias, bias_const)
    return layer


class Agent(nn.Module):
    """The minigrid RL starter files' CNN (3 small convolutions, 64 features) and two heads."""

    def __init__(self, envs: gym.vector.VectorEnv) -> None:
        super().__init__()
        h, w, c = envs.single_observation_space.shape  # channels-last
        self.network = nn.Sequential(
            layer_init(nn.Conv2d(c, 16, kernel_size=2)),
            nn.ReLU(),
            nn.MaxPool2d(2),
            layer_init(nn.Conv2d(16, 32, kernel_size=2)),
            nn.ReLU(),
            layer_init(nn.Conv2d(32, 64, kernel_size=2)),
            nn.ReLU(),
            nn.Flatten(),
        )
        n_features = 64 * ((h - 1) // 2 - 2) * ((w - 1) // 2 - 2)
        n_actions = envs.single_action_space.n
        self.actor = nn.Sequential(
            layer_init(nn.Linear(n_features, 64)),
            nn.Tanh(),
            layer_init(nn.Linear(64, n_actions), std=0.01),
        )
        self.critic = nn.Sequential(
            layer_init(nn.Linear(n_features, 64)), nn.Tanh(), layer_init(nn.Linear(64, 1), std=1.0)
        )

    def features(self, obs: torch.Tensor) -> torch.Tensor:
        """Features (B, 64) of ``obs`` (B, 7, 7, 3) uint8, channels-last.

        ``obs.permute(0, 3, 1, 2).float()`` is the channels-first (B, 3, 7, 7) float input
        that ``Conv2d`` expects.
        """
        return self.network(obs.permute(0, 3, 1, 2).float())

    def get_value(self, obs: torch.Tensor) -> torch.Tensor:
        return self.critic(self.features(obs))

    def get_action_and_value(self, obs: torch.Tensor, action: torch.Tensor | None = None):
        hidden = self.features(obs)
        probs = Categorical(logits=self.actor(hidden))
        if action is None:
            action = probs.sample()
        return action, probs.log_prob(action), probs.entropy(), self.critic(hidden)


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    run_name = f"{args.env_id}__{args.exp_name}__{args.seed}__{int(time.time())}"
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
    assert isinstance(envs.single_action_space, gym.spaces.Discrete), "discrete actions only"
    agent = Agent(envs).to(device)
    optimizer = optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5)

    obs_shape = envs.single_observation_space.shape
    # the observations stay uint8 (as the env returns them); the agent converts them
    obs = torch.zeros((args.num_steps, args.num_envs) + obs_shape, dtype=torch.uint8, device=device)
    actions = torch.zeros((args.num_steps, args.num_envs), dtype=torch.int64, device=device)
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
    next_done = torch.zeros(args.num_envs, device=device)
    result = {"reached_at_step": None, "reached_at_s": None, "episodes": 0, "history": []}
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
            if global_step == args.num_envs:  # the first step compiles a compiled env step
                result["first_step_cpu_s"] = time.process_time() - t_step
            next_done = (terminations | truncations).to(torch.float32)
            rewards[step] = reward.view(-1)
            ep_returns[step], ep_lengths[step], ep_mask[step] = episode_stats(infos)

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
        elapsed = time.time() - start_time
        sps = int(global_step / elapsed)
        mean_recent = float(np.mean(recent)) if recent else float("nan")
        losses = {
            "policy_loss": pg_loss.item(),
            "value_loss": v_loss.item(),
            "entropy": entropy_loss.item(),
            "approx_kl": approx_kl.item(),
        }
        result["losses"] = losses
        result["history"].append((global_step, mean_recent))
        if writer is not None:
            y_pred, y_true = b_values.cpu().numpy(), b_returns.cpu().numpy()
            var_y = np.var(y_true)
            explained_var = np.nan if var_y == 0 else 1 - np.var(y_true - y_pred) / var_y
            writer.add_scalar("charts/learning_rate", optimizer.param_groups[0]["lr"], global_step)
            for k, v in losses.items():
                writer.add_scalar(f"losses/{k}", v, global_step)
            writer.add_scalar("losses/old_approx_kl", old_approx_kl.item(), global_step)
            writer.add_scalar("losses/clipfrac", torch.stack(clipfracs).mean().item(), global_step)
            writer.add_scalar("losses/explained_variance", explained_var, global_step)
            writer.add_scalar("charts/SPS", sps, global_step)
        if not args.quiet and (iteration % 10 == 0 or iteration == args.num_iterations):
            print(
                f"global_step={global_step} mean_return(last {len(recent)})={mean_recent:.2f} "
                f"entropy={losses['entropy']:.3f} SPS={sps}",
                flush=True,
            )
        if (
            args.target_return is not None
            and len(recent) == recent.maxlen
            and mean_recent >= args.target_return
        ):
            cpu = time.process_time() - start_cpu
            result.update(reached_at_step=global_step, reached_at_s=elapsed, reached_at_cpu_s=cpu)
            print(
                f"reached mean return {mean_recent:.2f} at global_step={global_step} "
                f"after {elapsed:.1f} s wall, {cpu:.1f} s CPU"
            )
            break

    result.update(
        global_step=global_step,
        wall_s=time.time() - start_time,
        cpu_s=time.process_time() - start_cpu,
        mean_return=float(np.mean(recent)) if recent else float("nan"),
        returns=list(recent),
    )
    print(
        f"done: env_id={args.env_id} seed={args.seed} global_step={global_step} "
        f"wall={result['wall_s']:.1f}s cpu={result['cpu_s']:.1f}s "
        f"mean_return(last {len(recent)})={result['mean_return']:.2f} "
        f"episodes={result['episodes']} "
        f"(CPU s: rollout {result['rollout_cpu_s']:.1f}, update {result['update_cpu_s']:.1f}, "
        f"first env step {result.get('first_step_cpu_s', 0.0):.1f})"
    )
    envs.close()
    if args.capture_video:  # one episode of the trained agent, on a fresh rgb_array env
        result["videos"] = record_video(
            args.env_id,
            lambda obs: agent.get_action_and_value(obs)[0],
            f"{args.video_dir}/{run_name}",
            seed=args.seed,
            device=device,
        )
    if writer is not None:
        writer.close()
    return result


if __name__ == "__main__":
    main()
