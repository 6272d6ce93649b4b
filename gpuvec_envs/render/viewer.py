"""Showing rendered frames: tiling a batch into one image, and the pygame window of ``human``.

``render_mode="human"`` draws the frames of the first :data:`HUMAN_MAX_ENVS` envs, tiled,
in a pygame window after every ``reset`` and ``step``; pygame is an optional dependency
(``pip install "gpuvec_envs[render]"``).
"""

from __future__ import annotations

import math
import os
from typing import Any

import numpy as np
import torch
from gymnasium.error import DependencyNotInstalled

#: Envs shown in a ``human`` window (the first ones of the batch).
HUMAN_MAX_ENVS = 16


def tile(frames: torch.Tensor) -> torch.Tensor:
    """Tile (N, H, W, 3) frames into one (rows H, cols W, 3) image, as SB3's ``tile_images``.

    ``rows = ceil(sqrt(N))``, ``cols = ceil(N / rows)``, row-major, unused tiles black.
    """
    n, h, w, c = frames.shape
    rows = math.ceil(math.sqrt(n))
    cols = math.ceil(n / rows)
    pad = frames.new_zeros((rows * cols - n, h, w, c))
    grid = torch.cat([frames, pad]).reshape(rows, cols, h, w, c)
    return grid.permute(0, 2, 1, 3, 4).reshape(rows * h, cols * w, c)


def require_pygame() -> Any:
    """Import pygame for ``human`` rendering.

    Raises:
        DependencyNotInstalled: without pygame, naming the install and the alternative.
    """
    try:
        import pygame
    except ImportError as exc:
        raise DependencyNotInstalled(
            'render_mode="human" needs pygame: pip install "gpuvec_envs[render]" (or use '
            'render_mode="rgb_array" and show or record the frames yourself)'
        ) from exc
    return pygame


class HumanWindow:
    """A pygame window that shows one RGB image per call, at most ``fps`` times a second."""

    def __init__(self, title: str, fps: float | None) -> None:
        self._pygame = require_pygame()
        self._title = title
        self._fps = fps
        self._screen: Any = None
        self._clock: Any = None

    def show(self, image: np.ndarray) -> None:
        """Display ``image`` (H, W, 3) uint8, resizing the window to it."""
        pygame = self._pygame
        h, w = image.shape[:2]
        if self._screen is None or self._screen.get_size() != (w, h):
            os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")
            pygame.display.init()
            pygame.display.set_caption(self._title)
            self._screen = pygame.display.set_mode((w, h))
            self._clock = pygame.time.Clock()
        pygame.surfarray.blit_array(self._screen, np.ascontiguousarray(image.transpose(1, 0, 2)))
        pygame.event.pump()
        if self._fps:
            self._clock.tick(self._fps)
        pygame.display.flip()

    def close(self) -> None:
        """Close the window (idempotent)."""
        if self._screen is not None:
            self._pygame.display.quit()
            self._screen = None
