"""PPO (discrete actions) in CleanRL's single-file style, on a torch-native gpuvec env.

Follows CleanRL's ``ppo.py`` (same agent, losses and default hyperparameters); the changes
are the env (``gymnasium.make_vec("gpuvec/CartPole-v1", ...)``: a batch of envs stepped as
tensors on the training device) and a rollout that never leaves torch. By default the
rollout is collected by :class:`gpuvec_envs.rollout.RolloutCollector`: the policy's forward
pass, the action sampling and the env step of all ``--num-steps`` steps run as one
compiled call on CPU (a ``scan`` loop; one CUDA graph replay per rollout on a GPU), and the
episode statistics are computed from the rollout's buffers in a few tensor ops.
``--rollout loop`` keeps CleanRL's step loop (``envs.step`` with tensors,
:class:`RecordEpisodeStatistics` on the device), and
``--env-backend gymnasium`` runs that same loop on gymnasium's ``SyncVectorEnv`` (numpy,
seen as tensors through ``to_torch``) for comparison. The PPO update is the same code for
all three: by default CleanRL's update math made fast (as LeanRL does): each minibatch step
(forward, losses, backward, ``clip_grad_norm_``, Adam) is one compiled call, and the GAE
loop is a few tensor ops; ``--no-compile-update`` runs CleanRL's eager update unchanged.

``--overlap`` (fused rollout) collects rollout k+1 while rollout k's update runs: on CUDA
on a side stream, into a second rollout buffer, with a snapshot of the weights from before
update k as the behaviour policy (sound for PPO: see :class:`FusedRollouts`); off CUDA the
same schedule runs sequentially. For thousands of envs on a GPU use e.g.
``--num-envs 4096 --num-steps 16`` (``--num-minibatches`` must divide the batch).

Run: ``python examples/cleanrl_ppo.py --total-timesteps 500000``
(``--target-return 475`` stops at a mean episodic return of 475 and prints the time).
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import copy
import random
import time
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim
import torch.utils._pytree as pytree
from gymnasium.vector import AutoresetMode
from torch.distributions.categorical import Categorical

import gpuvec_envs  # noqa: F401  (registers gpuvec/...)
from gpuvec_envs.adapters.cleanrl import RecordEpisodeStatistics, episode_stats, to_torch
from gpuvec_envs.compiler import Backend
from gpuvec_envs.render.video import record_video
from gpuvec_envs.rollout import RolloutCollector, rollout_episode_stats


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    b = argparse.BooleanOptionalAction
    p.add_argument("--exp-name", default="cleanrl_ppo")
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
        "--env-id",
        default="CartPole-v1",
        help="a gpuvec ID without the gpuvec/ namespace, or a namespaced registered ID",
    )
    p.add_argument("--env-backend", choices=("gpuvec", "gymnasium"), default="gpuvec")
    p.add_argument(
        "--step-backend",
        choices=("auto", "eager", "compile"),
        default="compile",
        help="gpuvec: the env step, rollout and update compiled at their first call "
        "(compile), eagerly until a background compile is ready (auto), or eager; at 4 envs "
        "eager steps are slower than gymnasium's, so a short run gains most from compile",
    )
    p.add_argument(
        "--rollout",
        choices=("fused", "loop"),
        default="fused",
        help="gpuvec: collect with the fused rollout collector (policy + sampling + env step "
        "in one compiled call per step) or with CleanRL's step loop (always for gymnasium)",
    )
    p.add_argument(
        "--compile-update",
        action=b,
        default=True,
        help="each minibatch step (loss, backward, grad clip, Adam) as one compiled call, GAE "
        "as tensor ops and no distribution argument checks; off: CleanRL's eager update",
    )
    p.add_argument("--total-timesteps", type=int, default=500000)
    p.add_argument("--learning-rate", type=float, default=2.5e-4)
    p.add_argument("--num-envs", type=int, default=4)
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
    p.add_argument("--return-window", type=int, default=20)
    p.add_argument(
        "--max-seconds",
        type=float,
        default=None,
        help="stop after this many seconds of wall time (the return reached is reported)",
    )
    p.add_argument(
        "--overlap",
        action=b,
        default=False,
        help="fused rollout: collect rollout k+1 (with the weights before update k) while "
        "update k runs, into a second rollout buffer; concurrent on a side CUDA stream, "
        "sequential off CUDA",
    )
    p.add_argument("--quiet", action="store_true", help="print only the summary")
    args = p.parse_args(argv)
    if args.overlap and (args.env_backend != "gpuvec" or args.rollout != "fused"):
        p.error(
            "--overlap needs the fused rollout collector (--env-backend gpuvec --rollout fused)"
        )
    args.batch_size = args.num_envs * args.num_steps
    if args.batch_size % args.num_minibatches:  # the compiled update has one minibatch shape
        p.error(
            f"--num-minibatches {args.num_minibatches} must divide the batch "
            f"(--num-envs x --num-steps = {args.batch_size})"
        )
    args.minibatch_size = args.batch_size // args.num_minibatches
    args.num_iterations = args.total_timesteps // args.batch_size
    if args.num_iterations < 1:
        p.error(
            f"--total-timesteps {args.total_timesteps} is less than one rollout "
            f"(--num-envs x --num-steps = {args.batch_size})"
        )
    if args.num_iterations < 20 and not args.quiet:  # e.g. 4096 envs at the default budget
        print(
            f"note: {args.num_iterations} PPO iterations in all (--total-timesteps / "
            f"{args.batch_size}), the learning rate annealed to 0 over them: with many envs "
            "raise --total-timesteps"
        )
    return args


def make_envs(args: argparse.Namespace, device: torch.device) -> gym.vector.VectorEnv:
    """A tensor vector env with episode statistics; SAME_STEP autoreset, as CleanRL assumes."""
    if args.env_backend == "gpuvec":
        # the fused rollout reads the raw env (episode statistics come from its buffers)
        envs = gym.make_vec(
            args.env_id if "/" in args.env_id else f"gpuvec/{args.env_id}",
            num_envs=args.num_envs,
            device=device,
            autoreset_mode=AutoresetMode.SAME_STEP,
            backend=args.step_backend,
            validate=False,  # sampled actions are valid; skip the per-step range check
        )
        if args.rollout == "fused":
            return envs
        return RecordEpisodeStatistics(envs, buffer_length=args.return_window)
    envs = gym.make_vec(
        args.env_id,
        num_envs=args.num_envs,
        vectorization_mode="sync",
        vector_kwargs={"autoreset_mode": AutoresetMode.SAME_STEP},
    )
    envs = gym.wrappers.vector.RecordEpisodeStatistics(envs, buffer_length=args.return_window)
    return to_torch(envs, device)


def layer_init(layer: nn.Linear, std: float = np.sqrt(2), bias_const: float = 0.0) -> nn.Linear:
    torch.nn.init.orthogonal_(layer.weight, std)
    torch.nn.init.constant_(layer.bias, bias_const)
    return layer


class Agent(nn.Module):
    def __init__(self, envs: gym.vector.VectorEnv) -> None:
        super().__init__()
        n_obs = int(np.prod(envs.single_observation_space.shape))
        self.critic = nn.Sequential(
            layer_init(nn.Linear(n_obs, 64)),
            nn.Tanh(),
            layer_init(nn.Linear(64, 64)),
            nn.Tanh(),
            layer_init(nn.Linear(64, 1), std=1.0),
        )
        self.actor = nn.Sequential(
            layer_init(nn.Linear(n_obs, 64)),
            nn.Tanh(),
            layer_init(nn.Linear(64, 64)),
            nn.Tanh(),
            layer_init(nn.Linear(64, envs.single_action_space.n), std=0.01),
        )

    def get_value(self, x: torch.Tensor) -> torch.Tensor:
        return self.critic(x)

    def forward(self, x: torch.Tensor, action: torch.Tensor | None = None):
        return self.get_action_and_value(x, action)  # for torch.func.functional_call

    def get_action_and_value(self, x: torch.Tensor, action: torch.Tensor | None = None):
        logits = self.actor(x)
        probs = Categorical(logits=logits)
        if action is None:
            action = probs.sample()
        return action, probs.log_prob(action), probs.entropy(), self.critic(x)

    def act(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        """Sample an action for the fused rollout collector (compiles to one graph).

        The same distribution as ``Categorical(logits).sample()`` (inverse CDF of one
        uniform per env; ``torch.multinomial`` does not compile into a graph).
        """
        logp = torch.log_softmax(small_batch_mlp(self.actor, x), dim=-1)
        u = torch.rand(x.shape[0], 1, device=x.device, dtype=logp.dtype)
        cdf = torch.cumsum(logp.exp(), dim=-1)
        action = (cdf < u).sum(dim=-1).clamp_max(logp.shape[-1] - 1)
        log_prob = torch.gather(logp, 1, action[:, None])[:, 0]
        return {
            "action": action,
            "log_prob": log_prob,
            "value": small_batch_mlp(self.critic, x)[:, 0],
        }


def small_batch_mlp(mlp: nn.Sequential, x: torch.Tensor) -> torch.Tensor:
    """``mlp(x)``; for a batch of at most 64 rows each ``nn.Linear`` is a broadcast product.

    Inductor generates a broadcast product into the compiled graph's own loops, where a
    matmul is a call to a BLAS routine (the step's largest cost on CPU at CleanRL's 4 envs).
    Equal to ``mlp(x)`` up to float rounding.
    """
    if x.shape[0] > 64:
        return mlp(x)
    for layer in mlp:
        if isinstance(layer, nn.Linear):
            x = (x[:, :, None] * layer.weight.t()).sum(1) + layer.bias
        else:
            x = layer(x)
    return x


def ppo_loss(
    args, newlogprob, entropy, newvalue, mb_logprobs, mb_advantages, mb_returns, mb_values
):
    """CleanRL's PPO loss of one minibatch.

    Returns:
        ``(loss, pg_loss, v_loss, entropy_loss, old_approx_kl, approx_kl, clipfrac)``, 0-dim.
    """
    logratio = newlogprob - mb_logprobs
    ratio = logratio.exp()

    with torch.no_grad():
        # calculate approx_kl http://joschu.net/blog/kl-approx.html
        old_approx_kl = (-logratio).mean()
        approx_kl = ((ratio - 1) - logratio).mean()
        clipfrac = ((ratio - 1.0).abs() > args.clip_coef).float().mean()

    if args.norm_adv:
        mb_advantages = (mb_advantages - mb_advantages.mean()) / (mb_advantages.std() + 1e-8)

    # policy loss
    pg_loss1 = -mb_advantages * ratio
    pg_loss2 = -mb_advantages * torch.clamp(ratio, 1 - args.clip_coef, 1 + args.clip_coef)
    pg_loss = torch.max(pg_loss1, pg_loss2).mean()

    # value loss
    newvalue = newvalue.view(-1)
    if args.clip_vloss:
        v_loss_unclipped = (newvalue - mb_returns) ** 2
        v_clipped = mb_values + torch.clamp(newvalue - mb_values, -args.clip_coef, args.clip_coef)
        v_loss_clipped = (v_clipped - mb_returns) ** 2
        v_loss = 0.5 * torch.max(v_loss_unclipped, v_loss_clipped).mean()
    else:
        v_loss = 0.5 * ((newvalue - mb_returns) ** 2).mean()

    entropy_loss = entropy.mean()
    loss = pg_loss - args.ent_coef * entropy_loss + v_loss * args.vf_coef
    return loss, pg_loss, v_loss, entropy_loss, old_approx_kl, approx_kl, clipfrac


def gae(args, rewards, values, dones, next_value, next_done):
    """CleanRL's GAE loop as a few (T, T, N) tensor ops (no Python loop over the T steps).

    ``advantages[t] = sum_k (gamma * lambda)^(k - t) * delta[k]`` over the steps ``k >= t``
    up to the first episode end at or after ``t`` (``nextnonterminal == 0``), as the loop's
    recursion unrolled. Shapes (T, N); ``next_value`` (1, N), ``next_done`` (N,).

    Returns:
        ``(advantages, returns)``, shape (T, N).
    """
    nextnonterminal = 1.0 - torch.cat((dones[1:], next_done[None]))
    nextvalues = torch.cat((values[1:], next_value.reshape(1, -1)))
    delta = rewards + args.gamma * nextvalues * nextnonterminal - values
    ends = 1.0 - nextnonterminal
    ends_before = torch.cumsum(ends, 0) - ends  # (T, N): episode ends at steps < t
    steps = torch.arange(rewards.shape[0], device=rewards.device)
    lag = steps[None, :] - steps[:, None]  # (t, k): k - t
    decay = torch.where(
        lag >= 0, (args.gamma * args.gae_lambda) ** lag.clamp_min(0).to(torch.float64), 0.0
    ).to(rewards.dtype)
    # no episode end at the steps t..k-1: the product of nextnonterminal over them is 1
    same = ends_before[None, :, :] == ends_before[:, None, :]  # (t, k, N)
    advantages = (torch.where(same, decay[:, :, None], 0.0) * delta[None]).sum(1)
    return advantages, advantages + values


def gae_loop(args, rewards, values, dones, next_value, next_done):
    """CleanRL's GAE loop (``--no-compile-update``); the same arguments as :func:`gae`."""
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
    return advantages, advantages + values


#: Compiled minibatch steps of this process, by :meth:`CompiledUpdate._key` (several runs
#: of ``main`` in one process, as in the tests and the benchmark, compile once).
_COMPILED_STEPS: dict[tuple[Any, ...], Callable[..., Any]] = {}


class CompiledUpdate:
    """CleanRL's minibatch step (forward, :func:`ppo_loss`, backward, ``clip_grad_norm_``,
    ``optimizer.step()`` of Adam) as ONE compiled call, guard-free.

    The agent's parameters and Adam's state (kept in ``optimizer.state`` with Adam's own
    layout) are inputs that the compiled graph updates in place; the minibatch is gathered
    inside the graph from the whole batch and the minibatch indices. Adam's math is that of
    ``torch.optim.Adam`` (not amsgrad, no weight decay), with the bias corrections computed
    in float64 from the step count; the learning rate is read from the optimizer's param
    group at every call, so CleanRL's annealing applies. ``backend`` is that of gpuvec's
    compiler (:class:`gpuvec_envs.compiler.Backend`): ``"compile"`` compiles on the first
    call; ``"auto"`` (on the CPU) runs the same step eagerly while a child process compiles
    it, then switches. The shapes of the first call are fixed from then on.
    """

    def __init__(
        self,
        agent: nn.Module,
        optimizer: optim.Adam,
        args: argparse.Namespace,
        backend: str = "auto",
    ):
        group = optimizer.param_groups[0]
        if len(optimizer.param_groups) != 1 or group["amsgrad"] or group["weight_decay"]:
            raise ValueError("CompiledUpdate implements plain Adam with one param group")
        self.agent, self.optimizer, self.args = agent, optimizer, args
        self.backend = backend
        self.names = [name for name, _ in agent.named_parameters()]
        params = list(agent.parameters())
        for p in params:
            if not optimizer.state[p]:  # Adam's lazily created state, created up front
                optimizer.state[p] = {  # step on the params' device: one device per graph
                    "step": torch.tensor(0.0, device=p.device),
                    "exp_avg": torch.zeros_like(p, memory_format=torch.preserve_format),
                    "exp_avg_sq": torch.zeros_like(p, memory_format=torch.preserve_format),
                }
        st = [optimizer.state[p] for p in params]
        self.state = (
            tuple(p.detach() for p in params),  # aliases: in-place updates reach the agent
            tuple(s["exp_avg"] for s in st),
            tuple(s["exp_avg_sq"] for s in st),
            tuple(s["step"] for s in st),
        )
        self.lr = torch.zeros((), dtype=torch.float64, device=params[0].device)
        self._fn = None

    def _step(
        self,
        params,
        exp_avgs,
        exp_avg_sqs,
        steps,
        lr,
        b_obs,
        b_actions,
        b_logprobs,
        b_advantages,
        b_returns,
        b_values,
        mb_inds,
    ):
        """One minibatch step; updates params and Adam state in place, returns the losses."""
        args = self.args
        beta1, beta2 = self.optimizer.param_groups[0]["betas"]
        eps = self.optimizer.param_groups[0]["eps"]
        with torch.enable_grad():
            leaves = [p.detach().requires_grad_(True) for p in params]
            _, newlogprob, entropy, newvalue = torch.func.functional_call(
                self.agent,
                dict(zip(self.names, leaves, strict=True)),
                (b_obs[mb_inds], b_actions[mb_inds]),
            )
            out = ppo_loss(
                args,
                newlogprob,
                entropy,
                newvalue,
                b_logprobs[mb_inds],
                b_advantages[mb_inds],
                b_returns[mb_inds],
                b_values[mb_inds],
            )
            grads = torch.autograd.grad(out[0], leaves)
        # nn.utils.clip_grad_norm_
        norms = torch.stack([torch.linalg.vector_norm(g) for g in grads])
        total_norm = torch.linalg.vector_norm(norms)
        clip_coef = torch.clamp(args.max_grad_norm / (total_norm + 1e-6), max=1.0)
        # optim.Adam.step (torch/optim/adam.py, _single_tensor_adam)
        for param, grad, exp_avg, exp_avg_sq, step_t in zip(
            params, grads, exp_avgs, exp_avg_sqs, steps, strict=True
        ):
            grad = grad * clip_coef
            step_t.add_(1)
            exp_avg.lerp_(grad, 1 - beta1)
            exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
            step = step_t.to(torch.float64)
            bias_correction1 = 1 - beta1**step
            bias_correction2_sqrt = (1 - beta2**step).sqrt()
            step_size = (lr / bias_correction1).to(param.dtype)
            denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt.to(param.dtype)).add_(eps)
            param.sub_(step_size * (exp_avg / denom))
        return tuple(t.detach() for t in out)

    def __call__(self, *batch: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """``batch = (b_obs, b_actions, b_logprobs, b_advantages, b_returns, b_values,
        mb_inds)``; returns :func:`ppo_loss`'s outputs."""
        self.lr.fill_(self.optimizer.param_groups[0]["lr"])
        args = (*self.state, self.lr, *batch)
        if self._fn is None:
            key = self._key(args)
            if key not in _COMPILED_STEPS:  # reused by later runs in this process
                # inductor's C++ wrapper: less per-call overhead on CPU
                options = {"cpp_wrapper": True} if self.lr.device.type == "cpu" else None
                _COMPILED_STEPS[key] = Backend(
                    self._step, (), self.backend, "ppo_update", options=options
                )
            self._fn = _COMPILED_STEPS[key]
        return self._fn(*args)

    def _key(self, args: tuple[Any, ...]) -> tuple[Any, ...]:
        """What the compiled step depends on besides its inputs' values (it holds no
        reference to the agent or optimizer: every tensor it reads is an input)."""
        a, group = self.args, self.optimizer.param_groups[0]
        leaves = pytree.tree_leaves(args)
        layout = tuple((t.shape, t.stride(), t.dtype, t.device) for t in leaves)
        hyper = (a.clip_coef, a.norm_adv, a.clip_vloss, a.ent_coef, a.vf_coef, a.max_grad_norm)
        return repr(self.agent), layout, hyper, group["betas"], group["eps"]


class FusedRollouts:
    """Update batches from :class:`RolloutCollector` rollouts (``--rollout fused``).

    By default each :meth:`next` collects one rollout with the agent itself and returns it.

    With ``overlap`` (``--overlap``) collection runs one rollout ahead of the update, into
    two rollout buffers (one collector each, alternately) with a snapshot of the agent's
    weights as the behaviour policy: :meth:`next` starts rollout k+1 with the weights as
    they are after update k-1, then returns rollout k, whose update can run while k+1 is
    collected. On CUDA the collection runs on a side stream: the side stream waits for the
    main stream's work so far (update k-1 read the buffer that k+1 overwrites, and the
    snapshot must see its weights); the main stream waits for the snapshot copy before the
    update changes the weights, and for rollout k before reading it; tensors made on the
    side stream and read on the main one are marked with ``record_stream``. Off CUDA the
    same schedule runs sequentially (collect k+1, then update k).

    The lag is sound for PPO: its ratio divides by the log-probabilities stored with the
    rollout (those of the policy that acted), and the value targets bootstrap from the
    values of that same policy, so an update on data one iteration old is still the
    clipped surrogate around the policy that collected it; the clip bounds how far the
    update moves from it, as in any PPO epoch after the first.
    """

    def __init__(
        self,
        envs: gym.vector.VectorEnv,
        agent: Agent,
        args: argparse.Namespace,
        device: torch.device,
        overlap: bool = False,
    ) -> None:
        self.agent, self.overlap = agent, overlap
        self.behaviour = agent
        if overlap:
            self.behaviour = copy.deepcopy(agent).requires_grad_(False)
        # compile: always the scan (a timed choice of paths would not be bitwise reproducible)
        scan = True if args.step_backend == "compile" else "auto"
        self.collectors = [
            RolloutCollector(
                envs, self.behaviour.act, args.num_steps, backend=args.step_backend, scan=scan
            )
            for _ in range(2 if overlap else 1)
        ]
        self.side = torch.cuda.Stream(device) if overlap and device.type == "cuda" else None
        self.count = 0  # rollouts collected
        self.pending: tuple[dict[str, Any], Any] | None = None
        n = args.num_envs
        with self._on_side():  # the side stream's own tensors (freed there)
            self.next_done = torch.zeros(n, device=device)
            self.ep_carry = (
                torch.zeros(n, dtype=torch.float64, device=device),
                torch.zeros(n, dtype=torch.int64, device=device),
            )

    def next(self, ahead: bool = True) -> dict[str, torch.Tensor]:
        """The next rollout as a batch for :func:`ppo_update`.

        With ``overlap``, first starts the rollout after it (unless ``ahead`` is False: the
        last iteration).
        """
        if not self.overlap:
            return self._collect()
        if self.pending is None:  # the first rollout
            self.pending = self._launch()
            if self.side is not None:  # after it, the env's state lives on the side stream
                torch.cuda.current_stream().wait_stream(self.side)
        batch, ready = self.pending
        self.pending = self._launch() if ahead else None
        if ready is not None:
            torch.cuda.current_stream().wait_event(ready)
        return batch

    def _on_side(self) -> Any:
        return torch.cuda.stream(self.side) if self.side is not None else contextlib.nullcontext()

    def _launch(self) -> tuple[dict[str, torch.Tensor], torch.cuda.Event | None]:
        """Start a rollout with the agent's current weights; ``(batch, ready event)``."""
        if self.side is None:
            self._snapshot()
            return self._collect(), None
        main = torch.cuda.current_stream()
        self.side.wait_stream(main)  # the last update: its weights, and its reads of the buffer
        with torch.cuda.stream(self.side):
            self._snapshot()
            snapshot = self.side.record_event()
            batch = self._collect()
            for t in batch.values():
                t.record_stream(main)
            ready = self.side.record_event()
        main.wait_event(snapshot)  # the next update may change the weights only after the copy
        return batch, ready

    @torch.no_grad()
    def _snapshot(self) -> None:
        torch._foreach_copy_(list(self.behaviour.parameters()), list(self.agent.parameters()))

    def _collect(self) -> dict[str, torch.Tensor]:
        """One rollout into the next buffer, with the behaviour policy."""
        roll = self.collectors[self.count % len(self.collectors)].collect()
        self.count += 1
        done = roll.terminated | roll.truncated
        # dones[t]: the episode ended before step t's observation
        dones = torch.cat((self.next_done[None], done[:-1].to(torch.float32)))
        self.next_done = done[-1].to(torch.float32)
        ep_returns, ep_lengths, ep_mask, self.ep_carry = rollout_episode_stats(
            roll.rewards, done, self.ep_carry
        )
        with torch.no_grad():
            next_value = self.behaviour.get_value(roll.next_obs).reshape(1, -1)
        return {
            "obs": roll.obs,
            "actions": roll.actions,
            "logprobs": roll.extras["log_prob"],
            "values": roll.extras["value"],
            "rewards": roll.rewards,
            "dones": dones,
            "next_obs": roll.next_obs,
            "next_done": self.next_done,
            "next_value": next_value,
            "ep_returns": ep_returns,
            "ep_lengths": ep_lengths,
            "ep_mask": ep_mask,
        }


def ppo_update(
    args: argparse.Namespace,
    agent: Agent,
    optimizer: optim.Adam,
    compiled_update: CompiledUpdate | None,
    batch: dict[str, torch.Tensor],
) -> dict[str, Any]:
    """CleanRL's update of one rollout: GAE, then ``update_epochs`` epochs of minibatches.

    ``batch`` holds the rollout's ``(T, N, ...)`` tensors (``obs``, ``actions``,
    ``logprobs``, ``values``, ``rewards``, ``dones``), ``next_done`` (N,) and
    ``next_value`` (1, N). Returns the last minibatch's losses, the clip fractions and the
    flat values and returns (for the TensorBoard log).
    """
    device = batch["rewards"].device
    with torch.no_grad():
        # the tensor form holds (T, T, N) values: the loop beyond 16M of them
        vectorised = args.num_steps**2 * args.num_envs <= 2**24
        gae_fn = gae if compiled_update is not None and vectorised else gae_loop
        advantages, returns = gae_fn(
            args,
            batch["rewards"],
            batch["values"],
            batch["dones"],
            batch["next_value"],
            batch["next_done"],
        )

    # flatten the batch
    b_obs = batch["obs"].reshape((-1,) + batch["obs"].shape[2:])
    b_logprobs = batch["logprobs"].reshape(-1)
    b_actions = batch["actions"].reshape(-1)
    b_advantages = advantages.reshape(-1)
    b_returns = returns.reshape(-1)
    b_values = batch["values"].reshape(-1)

    # optimizing the policy and value network
    b_inds = np.arange(args.batch_size)
    clipfracs = []
    for _epoch in range(args.update_epochs):
        np.random.shuffle(b_inds)
        inds = torch.from_numpy(b_inds).to(device)
        for start in range(0, args.batch_size, args.minibatch_size):
            end = start + args.minibatch_size
            mb_inds = inds[start:end]
            if compiled_update is not None:  # the same step as one compiled call
                losses = compiled_update(
                    b_obs, b_actions, b_logprobs, b_advantages, b_returns, b_values, mb_inds
                )
                clipfracs.append(losses[-1])
                continue

            _, newlogprob, entropy, newvalue = agent.get_action_and_value(
                b_obs[mb_inds], b_actions[mb_inds]
            )
            old = (b_logprobs, b_advantages, b_returns, b_values)
            losses = ppo_loss(args, newlogprob, entropy, newvalue, *(x[mb_inds] for x in old))
            clipfracs.append(losses[-1])

            optimizer.zero_grad()
            losses[0].backward()
            nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
            optimizer.step()

        if args.target_kl is not None and float(losses[5]) > args.target_kl:
            break
    names = ("loss", "pg_loss", "v_loss", "entropy_loss", "old_approx_kl", "approx_kl")
    out = dict(zip(names, losses[:6], strict=True))
    out.update(clipfracs=clipfracs, b_values=b_values, b_returns=b_returns)
    return out


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
    validate_args = torch.distributions.Distribution._validate_args
    if args.compile_update:  # the checks of Categorical(logits) are host syncs
        torch.distributions.Distribution.set_default_validate_args(False)
    device = torch.device("cuda" if torch.cuda.is_available() and args.cuda else "cpu")

    envs = make_envs(args, device)
    assert isinstance(envs.single_action_space, gym.spaces.Discrete), "discrete actions only"
    agent = Agent(envs).to(device)
    optimizer = optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5)
    compiled_update = (
        CompiledUpdate(agent, optimizer, args, args.step_backend) if args.compile_update else None
    )

    obs_shape = envs.single_observation_space.shape
    recent = collections.deque(maxlen=args.return_window)
    fused = args.env_backend == "gpuvec" and args.rollout == "fused"
    if fused:
        rollouts = FusedRollouts(envs, agent, args, device, overlap=args.overlap)
    else:  # CleanRL's step loop fills these
        obs = torch.zeros((args.num_steps, args.num_envs) + obs_shape, device=device)
        actions = torch.zeros((args.num_steps, args.num_envs), dtype=torch.int64, device=device)
        logprobs = torch.zeros((args.num_steps, args.num_envs), device=device)
        rewards = torch.zeros((args.num_steps, args.num_envs), device=device)
        dones = torch.zeros((args.num_steps, args.num_envs), device=device)
        values = torch.zeros((args.num_steps, args.num_envs), device=device)
        # episode statistics, read back to the host once per iteration
        ep_returns = torch.zeros((args.num_steps, args.num_envs), device=device)
        ep_lengths = torch.zeros((args.num_steps, args.num_envs), dtype=torch.int64, device=device)
        ep_mask = torch.zeros((args.num_steps, args.num_envs), dtype=torch.bool, device=device)
    if args.overlap:  # printed even with --quiet: the run is not what the flag promises
        print(
            "--overlap: collection on a side CUDA stream, one rollout ahead of the update"
            if device.type == "cuda"
            else f"--overlap: stream overlap needs CUDA; on {device.type} the double-buffered "
            "schedule (rollout k+1 collected, then the update of rollout k) runs sequentially"
        )

    compiled = [
        *(["the rollout"] if fused and args.step_backend == "compile" else []),
        *(["the update"] if args.compile_update else []),
    ]
    if compiled and not args.quiet:  # a first run is silent for tens of seconds otherwise
        print(
            f"compiling {' and '.join(compiled)} at the first call: tens of seconds on a "
            "machine's first run, a few seconds once inductor's cache holds them"
        )
    global_step = 0
    start_time = time.time()
    start_cpu = time.process_time()  # CPU time of this process: robust to a loaded machine
    next_obs, _ = envs.reset(seed=args.seed)
    next_obs = next_obs.to(torch.float32)
    next_done = torch.zeros(args.num_envs, device=device)
    result = {"reached_at_step": None, "reached_at_s": None, "episodes": 0}
    result.update(rollout_cpu_s=0.0, update_cpu_s=0.0)  # CPU time of the two phases
    result.update(overlap=args.overlap, device=str(device))
    for iteration in range(1, args.num_iterations + 1):
        if args.anneal_lr:
            frac = 1.0 - (iteration - 1.0) / args.num_iterations
            optimizer.param_groups[0]["lr"] = frac * args.learning_rate

        t_rollout = time.process_time()
        if fused:  # the whole rollout: one compiled call, or one CUDA graph replay
            batch = rollouts.next(ahead=iteration < args.num_iterations)
            if iteration == 1:  # includes compiling the fused rollout
                result["first_step_cpu_s"] = time.process_time() - t_rollout
            global_step += args.num_steps * args.num_envs
        else:
            ep_mask.zero_()
        for step in range(0 if fused else args.num_steps):
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
        if not fused:
            with torch.no_grad():  # bootstrap value if not done
                next_value = agent.get_value(next_obs).reshape(1, -1)
            batch = dict(obs=obs, actions=actions, logprobs=logprobs, values=values)
            batch.update(rewards=rewards, dones=dones, next_done=next_done, next_value=next_value)
            batch.update(ep_returns=ep_returns, ep_lengths=ep_lengths, ep_mask=ep_mask)

        # one host read per iteration: the episodes that ended during the rollout
        ended = batch["ep_returns"][batch["ep_mask"]].tolist()
        t_update = time.process_time()
        result["rollout_cpu_s"] += t_update - t_rollout
        ended_lengths = batch["ep_lengths"][batch["ep_mask"]].tolist()
        recent.extend(ended)
        result["episodes"] += len(ended)
        if writer is not None:
            for r, ell in zip(ended, ended_lengths, strict=True):
                writer.add_scalar("charts/episodic_return", r, global_step)
                writer.add_scalar("charts/episodic_length", ell, global_step)

        upd = ppo_update(args, agent, optimizer, compiled_update, batch)

        result["update_cpu_s"] += time.process_time() - t_update
        elapsed = time.time() - start_time
        if iteration == 1:  # includes compiling the minibatch step
            result["first_update_cpu_s"] = time.process_time() - t_update
            result["first_iteration_s"] = elapsed  # wall, with compiling or loading it all
        sps = int(global_step / elapsed)
        mean_recent = float(np.mean(recent)) if recent else float("nan")
        if writer is not None:
            y_pred, y_true = upd["b_values"].cpu().numpy(), upd["b_returns"].cpu().numpy()
            var_y = np.var(y_true)
            explained_var = np.nan if var_y == 0 else 1 - np.var(y_true - y_pred) / var_y
            writer.add_scalar("charts/learning_rate", optimizer.param_groups[0]["lr"], global_step)
            for name in ("v_loss", "pg_loss", "old_approx_kl", "approx_kl"):
                label = {"v_loss": "value_loss", "pg_loss": "policy_loss"}.get(name, name)
                writer.add_scalar(f"losses/{label}", upd[name].item(), global_step)
            writer.add_scalar("losses/entropy", upd["entropy_loss"].item(), global_step)
            clipfrac = torch.stack(upd["clipfracs"]).mean().item()
            writer.add_scalar("losses/clipfrac", clipfrac, global_step)
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
        if args.max_seconds is not None and elapsed >= args.max_seconds:
            print(f"stopped at --max-seconds {args.max_seconds:g} (global_step={global_step})")
            break

    if device.type == "cuda":  # a rollout collected ahead may still run on the side stream
        torch.cuda.synchronize(device)
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
        f"first env step{' (fused rollout)' if fused else ''} "
        f"{result.get('first_step_cpu_s', 0.0):.1f}, first update "
        f"{result.get('first_update_cpu_s', 0.0):.1f})"
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
    torch.distributions.Distribution.set_default_validate_args(validate_args)
    if writer is not None:
        writer.close()
    return result


if __name__ == "__main__":
    main()
