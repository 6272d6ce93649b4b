"""SB3 PPO on CartPole: rollout-collection speed and time to a mean reward of 475.

Compares, in one run and with the same PPO hyperparameters, the gpuvec SB3 adapter
(``make_sb3_vec_env("gpuvec/CartPole-v1")``) with SB3's ``DummyVecEnv`` and
``SubprocVecEnv`` over gymnasium's ``CartPole-v1`` (both built by ``make_vec_env``).

* ``fps``: env steps per second of SB3's ``collect_rollouts`` (policy forward, env step,
  rollout buffer, callbacks: everything but the gradient updates), one rollout per kind in
  turn, median over ``--rollouts`` rounds after ``--warmup`` rounds (``torch.compile`` of
  the env step, process start-up). ``fps_per_cpu_s`` divides by this process's CPU time
  instead of wall-clock time (robust to load from other processes; not meaningful for
  ``SubprocVecEnv``, whose work is in its worker processes). ``null`` is a VecEnv that does
  no work at all: its fps is SB3's own ceiling, which no env can pass; ``null_episodes``
  also does no work but ends episodes at an untrained CartPole policy's rate, so SB3's
  per-episode work is included: the ceiling at that rate.
* ``breakdown``: where ``collect_rollouts``'s time goes per env step (µs), for each kind:
  the policy's forward pass, ``env.step``, ``rollout_buffer.add``, SB3's episode-info
  buffer, and the rest (SB3's loop, its ``dones`` loop, callbacks, the returns), means over
  the rounds after ``--warmup`` (the parts add up to ``total``). It shows what SB3's
  ceiling is made of.
* ``time``: wall-clock training time until the deterministic mean return over 20 episodes,
  evaluated every ``--eval-every`` env steps on gymnasium's own CartPole-v1, first reaches 475
  (evaluation time excluded; env construction and compilation included).

    OMP_NUM_THREADS=1 python examples/sb3_bench_cartpole.py fps --n-envs 256
    OMP_NUM_THREADS=1 python examples/sb3_bench_cartpole.py breakdown --vec null gpuvec dummy
    OMP_NUM_THREADS=1 python examples/sb3_bench_cartpole.py time --n-envs 16
"""

from __future__ import annotations

import argparse
import json
import time

import gymnasium as gym
import numpy as np
import torch
from stable_baselines3 import PPO
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.evaluation import evaluate_policy
from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv, VecEnv

from gpuvec_envs.adapters import make_sb3_vec_env

# rl-zoo's CartPole-v1 PPO settings (n_steps, batch, gae_lambda, gamma, epochs, linear
# schedules); n_epochs 10 instead of 20 and more envs, for wall-clock speed.
PPO_KWARGS = dict(
    n_steps=32,
    batch_size=256,
    gae_lambda=0.8,
    gamma=0.98,
    n_epochs=10,
    ent_coef=0.0,
)
LR, CLIP = 1e-3, 0.2


class NullVecEnv(VecEnv):
    """A VecEnv with CartPole's spaces that does no work: the ceiling of any env's fps.

    ``step_wait`` returns preallocated zeros and a fresh list of empty info dicts, so a
    rollout on it costs only SB3's own per-step work (policy forward, sampling, rollout
    buffer, callbacks, its loops over ``infos`` and ``dones``).
    """

    def __init__(self, n_envs: int) -> None:
        spec = gym.spec("CartPole-v1")
        single = gym.make(spec)
        super().__init__(n_envs, single.observation_space, single.action_space)
        single.close()
        self._obs = np.zeros((n_envs, 4), dtype=np.float32)
        self._rewards = np.zeros(n_envs, dtype=np.float32)
        self._dones = np.zeros(n_envs, dtype=bool)

    def reset(self):
        self.reset_infos = [{} for _ in range(self.num_envs)]
        return self._obs

    def step_async(self, actions) -> None:
        pass

    def step_wait(self):
        return self._obs, self._rewards, self._dones, [{} for _ in range(self.num_envs)]

    def close(self) -> None:
        pass

    def get_attr(self, attr_name, indices=None):
        return [getattr(self, attr_name)] * len(self._get_indices(indices))

    def set_attr(self, attr_name, value, indices=None) -> None:
        setattr(self, attr_name, value)

    def env_method(self, method_name, *method_args, indices=None, **method_kwargs):
        return [None] * len(self._get_indices(indices))

    def env_is_wrapped(self, wrapper_class, indices=None):
        return [False] * len(self._get_indices(indices))


class NullEpisodesVecEnv(NullVecEnv):
    """:class:`NullVecEnv` whose envs end an episode every ``length`` steps, staggered.

    The cheapest env that still meets SB3's contract at CartPole's episode rate under an
    untrained policy (~22 steps): each step ``n_envs / length`` envs report ``done`` with
    the infos ``make_vec_env``'s ``Monitor`` gives (``terminal_observation``,
    ``TimeLimit.truncated``, ``episode``), so SB3's per-episode work (its episode-info
    buffer, the ``dones`` loop) is paid as with a real env. Its fps is the ceiling of any
    env at that episode rate.
    """

    def __init__(self, n_envs: int, length: int = 22) -> None:
        super().__init__(n_envs)
        self._length, self._t = length, 0
        self._pattern = [(np.arange(n_envs) + t) % length == 0 for t in range(length)]
        self._finished = [np.flatnonzero(d).tolist() for d in self._pattern]

    def step_wait(self):
        k = self._t % self._length
        self._t += 1
        infos: list[dict] = [{} for _ in range(self.num_envs)]
        for i in self._finished[k]:
            infos[i] = {
                "terminal_observation": self._obs[i],
                "TimeLimit.truncated": False,
                "episode": {"r": float(self._length), "l": self._length, "t": 0.0},
            }
        return self._obs, self._rewards, self._pattern[k], infos


def make_env(kind: str, n_envs: int, seed: int, backend: str):
    if kind == "null":
        return NullVecEnv(n_envs)
    if kind == "null_episodes":
        return NullEpisodesVecEnv(n_envs)
    if kind == "gpuvec":
        return make_sb3_vec_env("gpuvec/CartPole-v1", n_envs=n_envs, seed=seed, backend=backend)
    if kind == "dummy":
        return make_vec_env("CartPole-v1", n_envs=n_envs, seed=seed, vec_env_cls=DummyVecEnv)
    if kind == "subproc":
        return make_vec_env(
            "CartPole-v1",
            n_envs=n_envs,
            seed=seed,
            vec_env_cls=SubprocVecEnv,
            vec_env_kwargs={"start_method": "fork"},
        )
    raise ValueError(kind)


def make_model(env, seed: int) -> PPO:
    return PPO(
        "MlpPolicy",
        env,
        learning_rate=lambda p: LR * p,
        clip_range=lambda p: CLIP * p,
        seed=seed,
        device="cpu",
        verbose=0,
        **PPO_KWARGS,
    )


def bench_fps(kinds: list[str], args: argparse.Namespace) -> list[dict]:
    """Rollout-collection fps of each kind, measured round-robin so load drifts hit all alike.

    Every kind gets a PPO model with the same hyperparameters; each round times one
    ``collect_rollouts`` (n_envs * n_steps env steps) per kind. The first ``--warmup`` rounds
    (compilation, process start-up) are left out; fps is steps / median rollout time.
    """
    setups, models = {}, {}
    for kind in kinds:
        t0 = time.perf_counter()
        env = make_env(kind, args.n_envs, args.seed, args.backend)
        models[kind] = make_model(env, args.seed)
        models[kind]._setup_learn(10**9, callback=None)
        setups[kind] = time.perf_counter() - t0
    times: dict[str, list[float]] = {kind: [] for kind in kinds}
    cpu_times: dict[str, list[float]] = {kind: [] for kind in kinds}
    n_steps = PPO_KWARGS["n_steps"]
    for _ in range(args.warmup + args.rollouts):
        for kind in kinds:
            model = models[kind]
            callback = model._init_callback(None)
            t, c = time.perf_counter(), time.process_time()
            model.collect_rollouts(model.env, callback, model.rollout_buffer, n_steps)
            times[kind].append(time.perf_counter() - t)
            cpu_times[kind].append(time.process_time() - c)
    results = []
    for kind in kinds:
        measured = sorted(times[kind][args.warmup :])
        cpu = sorted(cpu_times[kind][args.warmup :])
        steps = args.n_envs * n_steps
        results.append(
            {
                "vec_env": kind,
                "n_envs": args.n_envs,
                "fps_median": round(steps / measured[len(measured) // 2]),
                "fps_best": round(steps / measured[0]),
                # per CPU-second of this process: robust to load from other processes, but
                # blind to SubprocVecEnv's workers
                "fps_per_cpu_s": round(steps / cpu[len(cpu) // 2]),
                "rollout_s": [round(x, 4) for x in times[kind]],
                "setup_s": round(setups[kind], 2),
            }
        )
        models[kind].env.close()
    return results


def bench_breakdown(kind: str, args: argparse.Namespace) -> dict:
    """Per-step cost (µs) of the parts of ``collect_rollouts`` for one kind.

    The policy's ``forward``, the env's ``step``, the buffer's ``add`` and the model's
    ``_update_info_buffer`` are timed by wrapping them on these instances; ``rest`` is the
    rollout's time minus theirs.
    """
    env = make_env(kind, args.n_envs, args.seed, args.backend)
    model = make_model(env, args.seed)
    model._setup_learn(10**9, callback=None)
    parts = {
        "policy_forward": (model.policy, "forward"),
        "env_step": (model.env, "step"),
        "buffer_add": (model.rollout_buffer, "add"),
        "info_buffer": (model, "_update_info_buffer"),
    }
    spent = dict.fromkeys(parts, 0.0)

    def timed(name: str, fn):
        def call(*a, **k):
            t = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                spent[name] += time.perf_counter() - t

        return call

    for name, (obj, attr) in parts.items():
        setattr(obj, attr, timed(name, getattr(obj, attr)))
    n_steps = PPO_KWARGS["n_steps"]
    rounds: list[dict[str, float]] = []
    for _ in range(args.warmup + args.rollouts):
        for name in spent:
            spent[name] = 0.0
        callback = model._init_callback(None)
        t = time.perf_counter()
        model.collect_rollouts(model.env, callback, model.rollout_buffer, n_steps)
        total = time.perf_counter() - t
        rounds.append({"total": total, **spent, "rest": total - sum(spent.values())})
    env.close()
    measured = rounds[args.warmup :]
    steps = n_steps * len(measured)
    us_per_step = {k: round(sum(r[k] for r in measured) / steps * 1e6, 1) for k in rounds[0]}
    return {"vec_env": kind, "n_envs": args.n_envs, "us_per_step": us_per_step}


class TimeToReward(BaseCallback):
    """Evaluate every ``every`` env steps; stop when the mean return reaches ``target``."""

    def __init__(self, eval_env, every: int, target: float) -> None:
        super().__init__()
        self.eval_env, self.every, self.target = eval_env, every, target
        self.eval_s = 0.0
        self.next_eval = every
        self.history: list[tuple[int, float, float]] = []
        self.t_start = time.perf_counter()

    def _on_step(self) -> bool:
        if self.num_timesteps < self.next_eval:
            return True
        self.next_eval += self.every
        t = time.perf_counter()
        mean, _ = evaluate_policy(self.model, self.eval_env, n_eval_episodes=20, deterministic=True)
        self.eval_s += time.perf_counter() - t
        train_s = time.perf_counter() - self.t_start - self.eval_s
        self.history.append((self.num_timesteps, round(float(mean), 1), round(train_s, 1)))
        return mean < self.target


def bench_time(kind: str, args: argparse.Namespace) -> dict:
    eval_env = make_vec_env("CartPole-v1", n_envs=20, seed=10_000 + args.seed)
    cb = TimeToReward(eval_env, args.eval_every, args.target)  # the clock starts here
    env = make_env(kind, args.n_envs, args.seed, args.backend)
    model = make_model(env, args.seed)
    model.learn(args.max_timesteps, callback=cb)
    env.close()
    reached = bool(cb.history) and cb.history[-1][1] >= args.target
    return {
        "vec_env": kind,
        "n_envs": args.n_envs,
        "seed": args.seed,
        "reached": reached,
        "steps": cb.history[-1][0] if reached else None,
        "train_s": cb.history[-1][2] if reached else None,
        "history": cb.history,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("what", choices=["fps", "breakdown", "time"])
    parser.add_argument(
        "--vec",
        nargs="+",
        default=["gpuvec", "dummy", "subproc", "null"],
        help="gpuvec, dummy, subproc, null (an env that does no work: SB3's own ceiling), "
        "null_episodes (no work, but episodes end at an untrained policy's rate)",
    )
    parser.add_argument("--n-envs", type=int, default=256)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--backend", default="auto", help="gpuvec backend: auto/compile/eager")
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--rollouts", type=int, default=15)
    parser.add_argument("--eval-every", type=int, default=10_000)
    parser.add_argument("--target", type=float, default=475.0)
    parser.add_argument("--max-timesteps", type=int, default=300_000)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    results = bench_fps(args.vec, args) if args.what == "fps" else []
    if args.what != "fps":
        run = bench_breakdown if args.what == "breakdown" else bench_time
        results = [run(kind, args) for kind in args.vec]
    for result in results:
        print(json.dumps({**result, "threads": args.threads}), flush=True)


if __name__ == "__main__":
    main()
