"""PPO on gpuvec/CartPole-v1 with TorchRL's own pieces, until a mean return of 475.

The layout of TorchRL's PPO tutorial (https://pytorch.org/rl/stable/tutorials/coding_ppo.html):
a ``ProbabilisticActor`` and a ``ValueOperator``, TorchRL's ``Collector``, ``GAE``,
``ClipPPOLoss``, a replay buffer that hands out minibatches, with the env made by
``make_torchrl_env`` instead of ``GymEnv``. Hyperparameters are rl-zoo's for CartPole-v1 PPO
(32 steps per env and batch, minibatches of 256, gae_lambda 0.8, gamma 0.98, no entropy
bonus, learning rate 1e-3 decaying linearly), with 16 envs and 10 epochs.

Every ``--eval-every`` frames the deterministic policy plays 20 episodes on a separately
seeded gpuvec env (20 envs, one episode each); training stops when their mean return
reaches ``--target-return``, and the script prints the frames and wall-clock seconds.

    python examples/torchrl_ppo.py                      # CPU, stops at a mean return of 475
    python examples/torchrl_ppo.py --device cuda --num-envs 256
    python examples/torchrl_ppo.py --gym                # the same script on TorchRL's GymEnv
"""

from __future__ import annotations

import argparse
import time

import torch
from tensordict.nn import TensorDictModule
from torch import nn
from torchrl.collectors import Collector
from torchrl.data import LazyTensorStorage, ReplayBuffer, SamplerWithoutReplacement
from torchrl.envs import Compose, EnvBase, GymEnv, RewardSum, StepCounter, TransformedEnv
from torchrl.envs.utils import ExplorationType, set_exploration_type
from torchrl.modules import OneHotCategorical, ProbabilisticActor, ValueOperator
from torchrl.objectives import ClipPPOLoss
from torchrl.objectives.value import GAE

import gpuvec_envs  # noqa: F401  (registers gpuvec/...)
from gpuvec_envs.adapters.torchrl import make_torchrl_env


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--num-envs", type=int, default=16)
    p.add_argument("--num-steps", type=int, default=32, help="steps per env and batch")
    p.add_argument("--minibatch-size", type=int, default=256)
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--gamma", type=float, default=0.98)
    p.add_argument("--gae-lambda", type=float, default=0.8)
    p.add_argument("--clip-epsilon", type=float, default=0.2)
    p.add_argument("--max-grad-norm", type=float, default=0.5)
    p.add_argument("--total-frames", type=int, default=200_000, help="budget of env steps")
    p.add_argument("--target-return", type=float, default=475.0)
    p.add_argument("--eval-every", type=int, default=4096, help="frames between evaluations")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="cpu", help="device of the envs, nets and losses")
    p.add_argument(
        "--step-backend",
        default="eager",
        choices=("auto", "eager", "compile"),
        help="gpuvec step function (eager: no compile time, the right choice at few envs)",
    )
    p.add_argument("--torch-threads", type=int, default=1, help="0: leave torch's default")
    p.add_argument("--gym", action="store_true", help="TorchRL's GymEnv('CartPole-v1') instead")
    p.add_argument("--quiet", action="store_true")
    return p.parse_args(argv)


def make_env(args: argparse.Namespace, num_envs: int) -> EnvBase:
    """The batched CartPole env, with TorchRL's step counter and episode return."""
    if args.gym:
        base = GymEnv("CartPole-v1", num_envs=num_envs, device=args.device)
    else:
        base = make_torchrl_env(
            "gpuvec/CartPole-v1", num_envs, device=args.device, backend=args.step_backend
        )
    return TransformedEnv(base, Compose(StepCounter(), RewardSum()))


def mlp(n_in: int, n_out: int, out_gain: float) -> nn.Sequential:
    """SB3's ``MlpPolicy`` body: 64-64 tanh, orthogonal weights, zero biases."""
    net = nn.Sequential(
        nn.Linear(n_in, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, n_out)
    )
    for layer, gain in zip(net[::2], (2**0.5, 2**0.5, out_gain), strict=True):
        nn.init.orthogonal_(layer.weight, gain)
        nn.init.zeros_(layer.bias)
    return net


def evaluate(env: EnvBase, actor: ProbabilisticActor, max_steps: int = 500) -> float:
    """Mean return of the first episode of each env in ``env``, acting deterministically."""
    with torch.no_grad(), set_exploration_type(ExplorationType.DETERMINISTIC):
        rollout = env.rollout(max_steps, actor, break_when_any_done=False)
    done = rollout["next", "done"].squeeze(-1)  # (num_envs, max_steps)
    first = done.to(torch.uint8).argmax(dim=1, keepdim=True)  # every episode ends by 500
    returns = rollout["next", "episode_reward"].squeeze(-1).gather(1, first)
    return float(returns.mean())


def main(argv: list[str] | None = None) -> dict[str, float | int | None]:
    args = parse_args(argv)
    if args.torch_threads:
        torch.set_num_threads(args.torch_threads)  # small nets: one thread is fastest on CPU
    torch.manual_seed(args.seed)
    device = torch.device(args.device)
    start = time.perf_counter()

    env = make_env(args, args.num_envs)
    env.set_seed(args.seed)
    eval_env = make_env(args, 20)
    eval_env.set_seed(10_000 + args.seed)
    n_obs = env.observation_spec["observation"].shape[-1]
    n_actions = env.action_spec.space.n

    actor = ProbabilisticActor(
        TensorDictModule(mlp(n_obs, n_actions, 0.01), in_keys=["observation"], out_keys=["logits"]),
        spec=env.action_spec,
        in_keys=["logits"],
        distribution_class=OneHotCategorical,
        return_log_prob=True,
    ).to(device)
    value = ValueOperator(mlp(n_obs, 1, 1.0), in_keys=["observation"]).to(device)

    frames_per_batch = args.num_envs * args.num_steps
    total_frames = -(-args.total_frames // frames_per_batch) * frames_per_batch  # whole batches
    collector = Collector(
        env,
        actor,
        frames_per_batch=frames_per_batch,
        total_frames=total_frames,
        device=device,
        auto_register_policy_transforms=False,  # a feed-forward policy needs no InitTracker
    )
    buffer = ReplayBuffer(
        storage=LazyTensorStorage(frames_per_batch, device=device),
        sampler=SamplerWithoutReplacement(),
        batch_size=args.minibatch_size,
    )
    advantage = GAE(gamma=args.gamma, lmbda=args.gae_lambda, value_network=value)
    loss_module = ClipPPOLoss(
        actor,
        value,
        clip_epsilon=args.clip_epsilon,
        entropy_bonus=False,
        critic_coeff=0.5,
        loss_critic_type="l2",
        normalize_advantage=True,
    )
    optim = torch.optim.Adam(loss_module.parameters(), lr=args.lr, eps=1e-5)

    frames, next_eval, mean_return, reached = 0, args.eval_every, float("nan"), None
    for data in collector:  # (num_envs, num_steps)
        frames += data.numel()
        for group in optim.param_groups:  # linear decay over the budget, as rl-zoo
            group["lr"] = args.lr * max(0.0, 1.0 - (frames - data.numel()) / total_frames)
        for _ in range(args.epochs):
            with torch.no_grad():
                advantage(data)  # GAE with the current value net, bootstrapped at truncations
            buffer.extend(data.reshape(-1))
            for batch in buffer:
                losses = loss_module(batch)
                loss = losses["loss_objective"] + losses["loss_critic"]
                optim.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(loss_module.parameters(), args.max_grad_norm)
                optim.step()
        collector.update_policy_weights_()
        if frames >= next_eval:
            next_eval += args.eval_every
            mean_return = evaluate(eval_env, actor)
            if not args.quiet:
                print(
                    f"frames {frames:7d}  eval mean return {mean_return:6.1f}  "
                    f"{time.perf_counter() - start:6.1f} s"
                )
            if mean_return >= args.target_return:
                reached = frames
                break
    collector.shutdown()
    seconds = time.perf_counter() - start
    if reached is None:
        print(f"did not reach {args.target_return} in {frames} frames ({seconds:.1f} s)")
    else:
        print(
            f"reached a mean return of {mean_return:.1f} after {reached} frames in {seconds:.1f} s"
        )
    return {"frames": frames, "reached_at": reached, "mean_return": mean_return, "seconds": seconds}


if __name__ == "__main__":
    main()
