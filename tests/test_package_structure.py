"""The package's structure: no import circles, and ``import gpuvec_envs`` stays light."""

from __future__ import annotations

import ast
import json
import pathlib
import subprocess
import sys

import pytest

import gpuvec_envs

PACKAGE = pathlib.Path(gpuvec_envs.__file__).parent
ROOT = PACKAGE.parent


def _modules() -> dict[str, pathlib.Path]:
    """Dotted name -> file, for every module and package of gpuvec_envs."""
    mods = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        mods[".".join(parts)] = path
    return mods


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imported(name: str, path: pathlib.Path, mods: dict[str, pathlib.Path]) -> set[str]:
    """The gpuvec_envs modules ``name`` imports anywhere (functions included).

    Imports under ``if TYPE_CHECKING:`` are left out: they never run.
    """

    def owner(dotted: str) -> str | None:
        while dotted and dotted not in mods:
            dotted = dotted.rpartition(".")[0]
        return dotted or None

    out: set[str | None] = set()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    stack: list[ast.AST] = [ast.parse(path.read_text())]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and _is_type_checking(node):
            stack.extend(node.orelse)
            continue
        stack.extend(ast.iter_child_nodes(node))
        if isinstance(node, ast.Import):
            out.update(owner(a.name) for a in node.names if a.name.startswith("gpuvec_envs"))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            if source.startswith("gpuvec_envs"):
                for alias in node.names:
                    full = f"{source}.{alias.name}"
                    out.add(full if full in mods else owner(source))
    out.discard(None)
    out.discard(name)
    return {m for m in out if m is not None}


def _graph() -> dict[str, set[str]]:
    mods = _modules()
    return {name: _imported(name, path, mods) for name, path in mods.items()}


# The layers of docs/design.md's map, lowest first: a module imports from its own layer
# and the ones before it only.
LAYERS = (
    "compiler",
    "render",
    "core",
    "envs",
    "registry",
    "rollout",
    "distributed",
    "adapters",
    "sdk",
    "bench",
)


def _layer(module: str) -> int | None:
    if module == "gpuvec_envs":  # the package registers the IDs: the registry's layer
        return LAYERS.index("registry")
    parts = module.split(".")
    return LAYERS.index(parts[1]) if len(parts) > 1 and parts[1] in LAYERS else None


def test_every_module_sits_in_a_layer() -> None:
    assert [m for m in _modules() if _layer(m) is None] == []


def test_no_layer_imports_from_a_later_one() -> None:
    upward = [
        f"{name} -> {dep}"
        for name, deps in _graph().items()
        for dep in deps
        if _layer(dep) > _layer(name)
    ]
    assert upward == []


def import_circles() -> list[list[str]]:
    """Every strongly connected set of two or more modules in the import graph (Tarjan)."""
    edges = _graph()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                circles.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return circles


def test_no_import_circles() -> None:
    assert import_circles() == []


def test_the_circle_finder_sees_a_circle_hidden_in_a_function(tmp_path, monkeypatch) -> None:
    pkg = tmp_path / "gpuvec_envs"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "a.py").write_text("from gpuvec_envs.sub.b import g\n")
    (pkg / "sub" / "b.py").write_text("def g():\n    from gpuvec_envs.sub import a\n")
    (pkg / "sub" / "c.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from gpuvec_envs.sub import a\n"
    )
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", pkg)
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    assert import_circles() == [["gpuvec_envs.sub.a", "gpuvec_envs.sub.b"]]


# What a make_vec user never needs at import: the benchmarks (and matplotlib), the SDK, the
# adapters, autotune.
_HEAVY = (
    "gpuvec_envs.bench.tuning",
    "gpuvec_envs.bench",
    "gpuvec_envs.sdk",
    "gpuvec_envs.adapters.",
    "gpuvec_envs.rollout",
    "gpuvec_envs.distributed",
    "gpuvec_envs.render.video",
)


def _loaded_after(code: str) -> list[str]:
    out = subprocess.run(
        [sys.executable, "-c", f"{code}\nimport sys, json\nprint(json.dumps(sorted(sys.modules)))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return json.loads(out.splitlines()[-1])


def test_import_loads_only_what_make_vec_needs() -> None:
    loaded = _loaded_after(
        "import gpuvec_envs, gymnasium as gym\nassert 'gpuvec/CartPole-v1' in gym.registry"
    )
    assert [m for m in loaded if m.startswith(_HEAVY) or m == "matplotlib"] == []
    assert [m for m in loaded if m.startswith("gpuvec_envs.envs")] == []  # imported by make


@pytest.mark.parametrize("name", gpuvec_envs.__all__)
def test_every_public_name_resolves(name: str) -> None:
    assert getattr(gpuvec_envs, name) is not None


def test_a_submodule_import_does_not_shadow_a_public_function() -> None:
    # importing a module binds it on its package: no module may share a public name
    code = "import gpuvec_envs.bench.tuning, gpuvec_envs.sdk.custom, gpuvec_envs.sdk.check"
    loaded = _loaded_after(f"{code}\nassert gpuvec_envs.autotune.__name__ == 'autotune'")
    assert _loaded_after(
        "import gpuvec_envs.bench.tuning as t, gpuvec_envs as g\nassert g.autotune is t.autotune"
    )
    assert "gpuvec_envs.bench.tuning" in loaded
    assert not set(gpuvec_envs.__all__) & {p.stem for p in PACKAGE.iterdir()}


def test_public_names_load_on_first_access() -> None:
    loaded = _loaded_after("import gpuvec_envs\ngpuvec_envs.autotune\ngpuvec_envs.check_env_def")
    assert "gpuvec_envs.bench.tuning" in loaded
    assert "gpuvec_envs.sdk.check" in loaded
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        gpuvec_envs.nope  # noqa: B018
