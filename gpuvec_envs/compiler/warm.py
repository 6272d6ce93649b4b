"""Markers of the compiled CPU calls that inductor's on-disk cache holds (``warm_start``).

After a call compiles on the CPU, a marker named by the call's key is written into
inductor's cache directory. At its first call the ``auto``/``background`` backend looks
for its marker: when there is one, the graph is in the cache and builds in seconds, so it
is built there and then, instead of stepping eagerly while a child process derives the
same cache entry again (several seconds of import and tracing). The key covers what
changes the compiled code: the function and its bound arguments (pickled, by reference
where they can be, tensors by shape, dtype and device only), the arguments' shapes,
strides, dtypes and devices, the compiler options and thread count, torch's version, the
CPU's vector ISA, and the source files of gpuvec_envs and of the modules defining the
function and its bound objects. Clearing the cache clears the markers.
"""

from __future__ import annotations

import contextlib
import functools
import getpass
import hashlib
import io
import os
import pathlib
import pickle
import re
import sys
import tempfile
from collections.abc import Callable
from typing import Any

import torch

from gpuvec_envs.compiler.pytree import batch_size

#: The folder, inside inductor's cache directory, that holds the markers.
FOLDER = "gpuvec_warm"


def marker_dir() -> pathlib.Path:
    """Where the markers live: ``<inductor cache dir>/gpuvec_warm``."""
    return pathlib.Path(inductor_cache_dir()) / FOLDER


def inductor_cache_dir() -> str:
    """Inductor's cache directory, without importing inductor when it is not loaded yet.

    Importing ``torch._inductor`` takes ~1 s (it imports dynamo), which a warm-start
    check that finds no marker would add to the first step. Inductor's documented rule:
    ``TORCHINDUCTOR_CACHE_DIR``, else ``<temp dir>/torchinductor_<user>``.
    """
    utils = sys.modules.get("torch._inductor.runtime.cache_dir_utils")
    if utils is not None:
        return utils.cache_dir()
    path = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    if path is None:
        try:
            user = getpass.getuser()
        except (KeyError, ModuleNotFoundError, OSError):
            user = f"uid_{os.getuid()}" if hasattr(os, "getuid") else "unknown_user"
        user = re.sub(r'[\\/:*?"<>|]', "_", user)
        path = os.path.join(tempfile.gettempdir(), "torchinductor_" + user)
    return os.path.abspath(path)


@functools.cache
def _file_digest(path: str) -> bytes:
    """SHA-256 of one source file (once per process)."""
    try:
        return hashlib.sha256(pathlib.Path(path).read_bytes()).digest()
    except OSError:
        return b""


@functools.cache
def _package_digest() -> bytes:
    """SHA-256 over gpuvec_envs' own source files (once per process)."""
    root = pathlib.Path(__file__).resolve().parents[1]
    h = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        h.update(str(path.relative_to(root)).encode())
        h.update(_file_digest(str(path)))
    return h.digest()


def _module_files(objects: tuple[Any, ...]) -> list[str]:
    """Source files of the modules that define ``objects`` (or their classes)."""
    files = set()
    for obj in objects:
        for owner in (obj, type(obj)):
            module = sys.modules.get(getattr(owner, "__module__", None) or "")
            path = getattr(module, "__file__", None)
            if path:
                files.add(path)
    return sorted(files)


class _MetaPickler(pickle.Pickler):
    """Pickles tensors by shape, dtype and device only: weights change from run to run."""

    def persistent_id(self, obj: Any) -> Any:
        if isinstance(obj, torch.Tensor):
            return ("tensor", tuple(obj.shape), str(obj.dtype), obj.device.type)
        return None


def call_key(
    fn: Callable[..., Any],
    bound: tuple[Any, ...],
    args: tuple[Any, ...],
    settings: Any,
    dynamic_batch: bool = False,
) -> str | None:
    """The marker name of ``fn(*bound, *args)`` compiled with ``settings``; None if unknown.

    ``settings`` is anything with a stable ``repr`` that the compiled code depends on (the
    compiler options and the thread count). With ``dynamic_batch`` the batch size (the
    first tensor leaf's leading size) is left out: one compiled call serves every size.
    None when ``fn`` or ``bound`` do not pickle.
    """
    try:  # by reference where possible: cloudpickle tags classes it copies with a uuid
        buffer = io.BytesIO()
        _MetaPickler(buffer, protocol=4).dump((fn, bound))
        blob = buffer.getvalue()
    except Exception:  # noqa: BLE001 - lambdas, closures: cloudpickle copies them
        try:
            import cloudpickle

            blob = cloudpickle.dumps((fn, bound))
        except Exception:  # noqa: BLE001 - no key, no warm start
            return None
    h = hashlib.sha256(blob)
    leaves = torch.utils._pytree.tree_leaves(args)
    batch = batch_size(leaves) if dynamic_batch else None
    for leaf in leaves:
        if isinstance(leaf, torch.Tensor):
            shape: tuple[Any, ...] = tuple(leaf.shape)
            if batch is not None and shape[:1] == (batch,):
                shape = ("batch", *shape[1:])
            meta = (shape, leaf.stride(), str(leaf.dtype), leaf.device.type)
        else:
            meta = (type(leaf).__name__, leaf)
        h.update(repr(meta).encode())
    versions = (torch.__version__, torch.backends.cpu.get_cpu_capability(), settings)
    h.update(repr(versions).encode())
    h.update(_package_digest())
    for path in _module_files((fn, *bound)):
        h.update(_file_digest(path))
    return h.hexdigest()[:40]


def is_warm(key: str | None) -> bool:
    """Whether a marker for ``key`` exists."""
    return key is not None and (marker_dir() / key).exists()


def mark_warm(key: str | None) -> None:
    """Write the marker for ``key`` (silently skipped where the folder is not writable)."""
    if key is None:
        return
    with contextlib.suppress(OSError):
        folder = marker_dir()
        folder.mkdir(parents=True, exist_ok=True)
        (folder / key).touch()
