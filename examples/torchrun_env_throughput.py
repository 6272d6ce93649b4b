"""Env-steps/s of a batch of envs sharded over torchrun processes (random actions, no learner).

Every process steps its shard of ``--num-envs / world_size`` envs ``--steps`` times after a
warm-up (compilation); the figure is all envs' steps over the slowest process's time::

    torchrun --nproc_per_node=2 examples/torchrun_env_throughput.py --num-envs 65536
    python examples/torchrun_env_throughput.py --num-envs 65536   # one process
"""

from __future__ import annotations

import argparse
import json
import os
import time

import torch
import torch.distributed as dist

from gpuvec_envs import distributed


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--env-id", default="CartPole-v1")
    p.add_argument("--num-envs", type=int, default=65536, help="over all processes")
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--backend", choices=("auto", "eager", "compile"), default="auto")
    p.add_argument("--torch-threads", type=int, default=1, help="CPU threads per process")
    p.add_argument("--cuda", action=argparse.BooleanOptionalAction, default=True)
    args = p.parse_args()
    device = distributed.local_device() if args.cuda else torch.device("cpu")
    if "WORLD_SIZE" in os.environ:
        if device.type == "cuda":
            torch.cuda.set_device(device)
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    rank, world_size = distributed.world()
    torch.set_num_threads(args.torch_threads)
    envs = distributed.make_vec(
        args.env_id,
        args.num_envs // world_size,
        device=device,
        backend=args.backend,
        validate=False,
    )
    envs.reset(seed=0)
    gen = torch.Generator(device=device).manual_seed(rank)
    space = envs.single_action_space
    actions = [  # a few fixed batches of random actions, cycled
        torch.randint(0, int(space.n), (envs.num_envs,), generator=gen, device=device)
        for _ in range(8)
    ]

    def run(steps: int) -> float:
        if dist.is_initialized():
            dist.barrier()
        t0 = time.perf_counter()
        for t in range(steps):
            envs.step(actions[t % len(actions)])
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        elapsed = torch.tensor([time.perf_counter() - t0], dtype=torch.float64, device=device)
        if dist.is_initialized():
            dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
        return float(elapsed)

    run(args.warmup)  # compiles
    elapsed = run(args.steps)
    result = {
        "env_id": args.env_id,
        "world_size": world_size,
        "num_envs": envs.global_num_envs,
        "steps": args.steps,
        "env_steps_per_s": envs.global_num_envs * args.steps / elapsed,
        "backend": envs.unwrapped.backend,
        "device": str(device),
        "torch_threads_per_process": torch.get_num_threads(),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
    }
    if rank == 0:
        print(json.dumps(result))
    if dist.is_initialized():
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
