"""Showing envs: a window for ``render_mode="human"`` and MP4 clips of a batch's frames.

:mod:`.viewer` is the pygame window and frame tiling, :mod:`.video` the clips. See
docs/rendering.md.
"""
