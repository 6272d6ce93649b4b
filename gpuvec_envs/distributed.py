"""Envs sharded over the processes of a ``torch.distributed`` group (one per GPU, torchrun).

Each process (rank r of a world of W) steps its own shard of ``num_envs`` envs; together
the shards are ONE batch of ``W * num_envs`` envs: global env ``j = r * num_envs + i`` is
local env ``i`` of rank ``r``, and ``reset(seed=s)`` gives global env ``j`` the seed
``s + j``. Since every env has its own random stream, shard ``r`` under the same actions
is step for step the slice ``[r * num_envs, (r + 1) * num_envs)`` of a single process's
env of ``W * num_envs``, autoresets included. Two collectives help the learner log what
the whole world saw: :func:`all_reduce_episode_stats` and :func:`all_gather_envs`::

    import torch.distributed as dist
    from gpuvec_envs import distributed

    dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")  # torchrun
    envs = distributed.make_vec("CartPole-v1", num_envs=1024)  # this rank's shard
    obs, _ = envs.reset(seed=1)  # global env j gets seed 1 + j
    ...
    stats = distributed.all_reduce_episode_stats(ep_returns, ep_lengths, ep_mask)

Without an initialised process group (a plain ``python script.py``) the world is this
process alone: rank 0 of 1.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any, NamedTuple

import gymnasium as gym
import numpy as np
import torch
import torch.distributed as dist
from gymnasium.vector import VectorEnv, VectorWrapper

__all__ = [
    "EpisodeStats",
    "ShardedVecEnv",
    "all_gather_envs",
    "all_reduce_episode_stats",
    "local_device",
    "make_vec",
    "world",
]

_MAX_SEED = 2**63


def world(group: dist.ProcessGroup | None = None) -> tuple[int, int]:
    """``(rank, world_size)`` of this process in ``group`` (default: the whole world).

    Without an initialised process group this is ``(0, 1)``.

    Raises:
        RuntimeError: when launched by torchrun (``WORLD_SIZE`` > 1) but no process group
            has been initialised yet.
    """
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(group), dist.get_world_size(group)
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        raise RuntimeError(
            f"WORLD_SIZE={os.environ['WORLD_SIZE']} but no process group is initialised: call "
            "torch.distributed.init_process_group() first"
        )
    return 0, 1


def local_device() -> torch.device:
    """``cuda:LOCAL_RANK`` when CUDA is available (torchrun sets ``LOCAL_RANK``), else CPU."""
    if torch.cuda.is_available():
        return torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
    return torch.device("cpu")


class ShardedVecEnv(VectorWrapper):
    """One rank's shard of a batch of ``world_size * num_envs`` envs.

    Steps, spaces and infos are those of the wrapped env (this rank's ``num_envs`` envs);
    only seeding is global: ``reset(seed=s)`` seeds global env ``rank * num_envs + i`` (local
    env ``i``) with ``s + rank * num_envs + i``. Any vector env whose ``reset(seed=s)`` seeds
    env ``i`` with ``s + i`` can be wrapped (gpuvec envs and gymnasium's sync/async envs).

    Args:
        env: This rank's vector env of ``num_envs`` envs.
        rank: This process's rank, in ``[0, world_size)``.
        world_size: Number of shards (processes); every shard has ``env.num_envs`` envs.

    Raises:
        ValueError: on a rank outside ``[0, world_size)``.
    """

    def __init__(self, env: VectorEnv, rank: int, world_size: int) -> None:
        super().__init__(env)
        for name, value in (("rank", rank), ("world_size", world_size)):
            if not isinstance(value, (int, np.integer)) or isinstance(value, bool):
                raise TypeError(f"{name} must be an int, got {type(value).__name__}")
        if world_size < 1 or not 0 <= rank < world_size:
            raise ValueError(f"need 0 <= rank < world_size, got rank={rank}, {world_size=}")
        self.rank, self.world_size = int(rank), int(world_size)
        #: Torch device of the wrapped env (CPU for a numpy env).
        self.device = torch.device(getattr(env.unwrapped, "device", "cpu"))
        #: (num_envs,) int64 on ``device``: the global index of each local env.
        self.global_index = torch.arange(
            self.env_offset, self.env_offset + self.num_envs, dtype=torch.int64, device=self.device
        )

    @property
    def global_num_envs(self) -> int:
        """Envs in all shards together: ``world_size * num_envs``."""
        return self.world_size * self.num_envs

    @property
    def env_offset(self) -> int:
        """Global index of this shard's first env: ``rank * num_envs``."""
        return self.rank * self.num_envs

    def reset(
        self,
        *,
        seed: int | Sequence[int | None] | None = None,
        options: dict[str, Any] | None = None,
    ) -> tuple[Any, dict[str, Any]]:
        """Reset this shard; seeds are global.

        Args:
            seed: ``s``: global env ``j`` gets seed ``s + j`` (``0 <= s <= 2**63 -
                global_num_envs``). A sequence of ``global_num_envs`` seeds (ints or
                ``None``): this shard takes its slice. ``None``: fresh entropy per rank.
            options: Passed on unchanged (a ``reset_mask`` is this shard's, shape
                (num_envs,)).

        Raises:
            TypeError: on a seed that is not an int, a sequence or ``None``.
            ValueError: on an int seed out of range or a sequence of the wrong length.
        """
        return self.env.reset(seed=self._local_seed(seed), options=options)

    def _local_seed(self, seed: Any) -> Any:
        if seed is None:
            return None
        g = self.global_num_envs
        if isinstance(seed, (int, np.integer)) and not isinstance(seed, bool):
            if not 0 <= int(seed) <= _MAX_SEED - g:
                raise ValueError(f"seed must be in [0, 2**63 - global_num_envs={g}], got {seed}")
            return int(seed) + self.env_offset
        if isinstance(seed, (list, tuple, np.ndarray, torch.Tensor)):
            if len(seed) != g:
                raise ValueError(
                    f"a seed sequence must have global_num_envs={g} entries (world_size="
                    f"{self.world_size} x num_envs={self.num_envs}), got {len(seed)}"
                )
            return seed[self.env_offset : self.env_offset + self.num_envs]
        raise TypeError(f"seed must be an int, a sequence or None, got {type(seed).__name__}")

    def __repr__(self) -> str:
        """Rank, world size and the wrapped env."""
        return f"<ShardedVecEnv rank={self.rank}/{self.world_size}, {self.env}>"


def make_vec(
    env_id: str,
    num_envs: int,
    *,
    device: str | torch.device | None = None,
    group: dist.ProcessGroup | None = None,
    **kwargs: Any,
) -> ShardedVecEnv:
    """This rank's shard of ``num_envs`` envs of ``env_id`` (global batch ``world * num_envs``).

    Args:
        env_id: A gpuvec ID, with or without the ``gpuvec/`` namespace (``"CartPole-v1"``).
        num_envs: Envs in this shard; every rank must pass the same number.
        device: Default :func:`local_device` (``cuda:LOCAL_RANK`` or CPU).
        group: The process group the envs are sharded over (default: the whole world).
        **kwargs: Passed to ``gymnasium.make_vec`` (``autoreset_mode``, ``backend``, ...).

    Returns:
        The shard, a :class:`ShardedVecEnv` around a :class:`~gpuvec_envs.GpuVecEnv`.

    Raises:
        TypeError: when ``env_id`` is not a string.
        ValueError: on an ID gymnasium does not know.
        RuntimeError: under torchrun without an initialised process group.
    """
    if not isinstance(env_id, str):
        raise TypeError(f"env_id must be a str, got {type(env_id).__name__}")
    rank, world_size = world(group)
    full_id = env_id if env_id.startswith("gpuvec/") else f"gpuvec/{env_id}"
    if full_id not in gym.registry:
        known = sorted(k for k in gym.registry if k.startswith("gpuvec/"))
        raise ValueError(f"no gpuvec env {env_id!r}; known: {known}")
    env = gym.make_vec(
        full_id, num_envs=num_envs, device=local_device() if device is None else device, **kwargs
    )
    return ShardedVecEnv(env, rank, world_size)


class EpisodeStats(NamedTuple):
    """Statistics of the episodes all ranks finished; each a 0-dim float64 tensor.

    Means, extremes and the standard deviation (population, as ``np.std``) are NaN when no
    episode ended.
    """

    count: torch.Tensor  # episodes ended, on all ranks
    return_mean: torch.Tensor
    return_std: torch.Tensor
    return_min: torch.Tensor
    return_max: torch.Tensor
    length_mean: torch.Tensor  # [steps]

    def to_dict(self) -> dict[str, float]:
        """The statistics as Python floats (reads them back from the device)."""
        values = torch.stack(tuple(self)).tolist()
        return dict(zip(self._fields, values, strict=True))


def all_reduce_episode_stats(
    returns: torch.Tensor,
    lengths: torch.Tensor,
    mask: torch.Tensor,
    group: dist.ProcessGroup | None = None,
) -> EpisodeStats:
    """Count, mean, std, min and max of the episode returns and lengths over all ranks.

    Two collectives (one sum, one max) of a few float64 values; no host read-back, so the
    result stays on the device until read. Every rank of ``group`` must call it.

    Args:
        returns: Float, any shape: episode returns, read where ``mask`` is True (e.g. a
            rollout's (T, N) ``ep_returns`` or ``info["episode"]["r"]``, shape (N,)).
        lengths: Integer or float, the shape of ``returns``: episode lengths [steps].
        mask: Bool, the shape of ``returns``: where an episode ended.
        group: The process group (default: the whole world; none initialised: this rank).

    Raises:
        TypeError: when ``mask`` is not a bool tensor.
        ValueError: when the three shapes differ.
    """
    if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool:
        raise TypeError(f"mask must be a bool tensor, got {getattr(mask, 'dtype', type(mask))}")
    if not returns.shape == lengths.shape == mask.shape:
        raise ValueError(
            f"returns, lengths and mask must have one shape, got {tuple(returns.shape)}, "
            f"{tuple(lengths.shape)} and {tuple(mask.shape)}"
        )
    m = mask.reshape(-1)
    r = returns.reshape(-1).to(torch.float64)
    n = lengths.reshape(-1).to(torch.float64)
    zero = torch.zeros((), dtype=torch.float64, device=r.device)
    sums = torch.stack(
        (
            m.sum(dtype=torch.float64),
            torch.where(m, r, zero).sum(),
            torch.where(m, r * r, zero).sum(),
            torch.where(m, n, zero).sum(),
        )
    )
    neg_inf = torch.full((1,), -torch.inf, dtype=torch.float64, device=r.device)
    extremes = torch.stack(  # (max, -min): one MAX reduction for both
        (
            torch.cat((torch.where(m, r, -torch.inf), neg_inf)).max(),
            torch.cat((torch.where(m, -r, -torch.inf), neg_inf)).max(),
        )
    )
    _, world_size = world(group)
    if world_size > 1:
        dist.all_reduce(sums, op=dist.ReduceOp.SUM, group=group)
        dist.all_reduce(extremes, op=dist.ReduceOp.MAX, group=group)
    count, r_sum, r_sq, n_sum = sums.unbind()
    nan = torch.full_like(count, torch.nan)
    none = count == 0
    mean = r_sum / count
    var = (r_sq / count - mean * mean).clamp_min(0.0)
    return EpisodeStats(
        count=count,
        return_mean=torch.where(none, nan, mean),
        return_std=torch.where(none, nan, var.sqrt()),
        return_min=torch.where(none, nan, -extremes[1]),
        return_max=torch.where(none, nan, extremes[0]),
        length_mean=torch.where(none, nan, n_sum / count),
    )


def all_gather_envs(
    tensor: torch.Tensor, dim: int = 0, group: dist.ProcessGroup | None = None
) -> torch.Tensor:
    """A per-env tensor of every rank, concatenated in rank order along the env dimension.

    For logging small tensors (per-env returns, flags, observations of a few envs): the
    result is what a single process with all ``world_size * num_envs`` envs would hold.
    Every rank of ``group`` must call it with a tensor of the same shape and dtype.

    Args:
        tensor: This rank's tensor, env dimension ``dim`` of size ``num_envs``; any dtype
            (bool is sent as uint8).
        dim: The env dimension (e.g. 1 for a (T, N, ...) rollout buffer).
        group: The process group (default: the whole world; none initialised: this rank).

    Returns:
        Shape of ``tensor`` with ``world_size * num_envs`` along ``dim``; same dtype and
        device.
    """
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"expected a tensor, got {type(tensor).__name__}")
    if not -tensor.dim() <= dim < tensor.dim():
        raise ValueError(f"dim {dim} out of range for a tensor of shape {tuple(tensor.shape)}")
    _, world_size = world(group)
    if world_size == 1:
        return tensor
    send = tensor.to(torch.uint8) if tensor.dtype == torch.bool else tensor
    send = send.contiguous()
    parts = [torch.empty_like(send) for _ in range(world_size)]
    dist.all_gather(parts, send, group=group)
    out = torch.cat(parts, dim=dim)
    return out.to(torch.bool) if tensor.dtype == torch.bool else out
