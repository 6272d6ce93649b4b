"""Generated flatteners and unflatteners of pytrees of tensors, tuples, dicts and ``None``.

A compiled call takes and returns flat tuples of tensors. Rebuilding the structure with
``torch.utils._pytree`` on every call costs microseconds per node, so the code that does
it is generated once per structure as plain Python (attribute-free indexing and one
constructor call per NamedTuple).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch.utils import _pytree as torch_pytree


def is_namedtuple(x: Any) -> bool:
    """Whether ``x`` is a NamedTuple instance."""
    return isinstance(x, tuple) and hasattr(type(x), "_fields")


def _flatten_paths(tree: Any, path: str, out: list[str]) -> None:
    """Append the access expression of every tensor leaf of ``tree`` to ``out``."""
    if isinstance(tree, torch.Tensor):
        out.append(path)
    elif isinstance(tree, tuple):
        for i, sub in enumerate(tree):
            _flatten_paths(sub, f"{path}[{i}]", out)
    elif isinstance(tree, dict):
        for key, sub in tree.items():
            _flatten_paths(sub, f"{path}[{_key(key)}]", out)
    elif tree is not None:
        raise TypeError(f"unsupported pytree node {type(tree).__name__}")


def _key(key: Any) -> str:
    """The literal of a dict key (str keys only: their ``repr`` is valid code)."""
    if not isinstance(key, str):
        raise TypeError(f"unsupported pytree dict key {key!r} (str keys only)")
    return repr(key)


def leaf_paths(tree: Any, root: str = "t") -> list[str]:
    """Access expressions (``root[0][1]``) of the tensor leaves of ``tree``, in order.

    Raises:
        TypeError: on a node that is not a tensor, tuple, dict (str keys) or ``None``.
    """
    out: list[str] = []
    _flatten_paths(tree, root, out)
    return out


def make_flattener(example_args: tuple[Any, ...]) -> Callable[..., tuple[torch.Tensor, ...]]:
    """Generated ``f(*args) -> tuple of tensor leaves`` for args shaped like ``example_args``.

    Supported nodes: tensors, tuples (NamedTuples included), dicts with str keys, ``None``.
    """
    paths: list[str] = []
    for i, arg in enumerate(example_args):
        _flatten_paths(arg, f"a{i}", paths)
    params = ", ".join(f"a{i}" for i in range(len(example_args)))
    body = ", ".join(paths) + ("," if len(paths) == 1 else "")
    namespace: dict[str, Any] = {}
    exec(f"def flatten({params}):\n    return ({body})\n", namespace)  # noqa: S102
    return namespace["flatten"]


def make_unflattener(example: Any) -> Callable[[tuple[torch.Tensor, ...]], Any]:
    """Generated ``g(leaves) -> tree`` rebuilding the structure of ``example`` from leaves."""
    namespace: dict[str, Any] = {}
    counter = [0]

    def expr(tree: Any) -> str:
        if isinstance(tree, torch.Tensor):
            counter[0] += 1
            return f"o[{counter[0] - 1}]"
        if tree is None:
            return "None"
        if isinstance(tree, tuple):
            parts = [expr(sub) for sub in tree]
            if is_namedtuple(tree):
                name = f"T{len(namespace)}"
                namespace[name] = type(tree)
                return f"{name}({', '.join(parts)})"
            return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"
        if isinstance(tree, dict):
            return "{" + ", ".join(f"{_key(k)}: {expr(v)}" for k, v in tree.items()) + "}"
        raise TypeError(f"unsupported pytree node {type(tree).__name__}")

    code = f"def unflatten(o):\n    return {expr(example)}\n"
    exec(code, namespace)  # noqa: S102
    return namespace["unflatten"]


def rebuild(example: Any, leaves: Iterator[torch.Tensor]) -> Any:
    """Rebuild ``example``'s structure taking tensors from the iterator ``leaves``."""
    if isinstance(example, torch.Tensor):
        return next(leaves)
    if example is None:
        return None
    if isinstance(example, dict):
        return {k: rebuild(v, leaves) for k, v in example.items()}
    parts = [rebuild(sub, leaves) for sub in example]
    return type(example)(*parts) if is_namedtuple(example) else tuple(parts)


def layout(t: torch.Tensor) -> tuple[Any, ...]:
    """Shape, dtype and strides of a tensor."""
    return t.shape, t.dtype, t.stride()


def same_layout(a: Any, b: Any) -> bool:
    """Whether two pytrees have leaves of equal shapes, strides, dtypes and devices."""
    (la, sa), (lb, sb) = torch_pytree.tree_flatten(a), torch_pytree.tree_flatten(b)
    return sa == sb and all(
        (x.shape, x.stride(), x.dtype, x.device) == (y.shape, y.stride(), y.dtype, y.device)
        for x, y in zip(la, lb, strict=True)
    )


def clone_tensors(tree: Any) -> Any:
    """``tree`` with every tensor leaf cloned (other leaves kept)."""
    return torch_pytree.tree_map(lambda t: t.clone() if isinstance(t, torch.Tensor) else t, tree)


def on_cuda(tree: Any) -> bool:
    """Whether ``tree`` has tensor leaves and all of them are on CUDA devices."""
    leaves = [t for t in torch_pytree.tree_leaves(tree) if isinstance(t, torch.Tensor)]
    return bool(leaves) and all(t.is_cuda for t in leaves)


def batch_size(leaves: Any) -> int | None:
    """The batch size ``dynamic_batch`` leaves free: the first tensor leaf's leading size.

    None if no tensor leaf has a dimension.
    """
    tensors = torch_pytree.tree_leaves(leaves)
    return next((t.shape[0] for t in tensors if isinstance(t, torch.Tensor) and t.dim() > 0), None)
