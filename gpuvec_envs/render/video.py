"""Videos of a policy: episodes of a fresh ``rgb_array`` env written by gymnasium's recorder.

Used by the CleanRL examples' ``--capture-video``; the encoder is moviepy's ffmpeg
(``pip install "gpuvec_envs[render]"``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium as gym
import torch


def record_video(
    env_id: str,
    policy: Callable[[torch.Tensor], torch.Tensor],
    video_folder: str | Path,
    *,
    episodes: int = 1,
    seed: int = 0,
    device: str | torch.device = "cpu",
    name_prefix: str = "eval",
    max_steps: int = 10_000,
    **env_kwargs: Any,
) -> list[Path]:
    """Run ``policy`` in one env of ``env_id`` and write each of ``episodes`` episodes as MP4.

    Args:
        env_id: A registered ID, with or without the ``gpuvec/`` namespace.
        policy: Maps a batch of one observation (1, *obs_shape) on ``device`` to a batch of
            one action (1, *action_shape); called without gradients.
        video_folder: Directory of the videos (created if needed).
        episodes: Episodes to record, from the first.
        seed: Reset seed.
        device: Torch device of the env and of the policy's inputs.
        name_prefix: File name prefix, as in gymnasium's ``RecordVideo``.
        max_steps: Stop after this many steps even if episodes are unfinished.
        **env_kwargs: Further ``make_vec`` keywords (env parameters, ``dtype``...).

    Returns:
        The video files written, in episode order.

    Raises:
        ValueError: ``episodes`` < 1.
    """
    if episodes < 1:
        raise ValueError(f"episodes must be >= 1, got {episodes}")
    if not env_id.startswith("gpuvec/"):
        env_id = f"gpuvec/{env_id}"
    folder = Path(video_folder)
    env_kwargs.setdefault("backend", "eager")  # a short run: compiling would cost more
    envs = gym.make_vec(env_id, num_envs=1, device=device, render_mode="rgb_array", **env_kwargs)
    envs = gym.wrappers.vector.RecordVideo(
        envs,
        str(folder),
        episode_trigger=lambda episode: episode < episodes,
        name_prefix=name_prefix,
        disable_logger=True,
    )
    obs, _ = envs.reset(seed=seed)
    finished = 0
    with torch.no_grad():
        for _ in range(max_steps):
            obs, _, terminated, truncated, _ = envs.step(policy(obs))
            finished += int(terminated[0] | truncated[0])
            if finished >= episodes:
                break
    envs.close()
    return sorted(
        folder.glob(f"{name_prefix}-episode-*.mp4"),
        key=lambda p: int(p.stem.rsplit("-", 1)[1]),
    )
