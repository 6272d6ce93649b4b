"""Relative links and anchors of every Markdown file in the repository resolve."""

from __future__ import annotations

import os
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
SKIP_DIRS = {".venv", ".git", "build", "dist", "bench_out", "node_modules", "__pycache__"}

_FENCE = re.compile(r"^\s*(```|~~~)")
_CODE_SPAN = re.compile(r"`+[^`]*`+")
_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_REF_DEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+\"[^\"]*\")?\s*$")
_HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_HTML_ID = re.compile(r"<a\s+(?:id|name)=\"([^\"]+)\"")


def markdown_files(root: pathlib.Path) -> list[pathlib.Path]:
    """Every ``*.md`` under ``root``, outside hidden, virtual-env and build folders."""
    out = []
    for d, dirs, files in os.walk(root):
        dirs[:] = sorted(x for x in dirs if x not in SKIP_DIRS and not x.startswith("."))
        out += [pathlib.Path(d) / f for f in sorted(files) if f.endswith(".md")]
    return out


def _prose_lines(text: str, *, strip_code: bool = True) -> list[tuple[int, str]]:
    """Lines outside fenced code blocks (inline code spans removed with ``strip_code``)."""
    out, fenced = [], False
    for i, line in enumerate(text.splitlines(), 1):
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            out.append((i, _CODE_SPAN.sub("", line) if strip_code else line))
    return out


def slug(heading: str) -> str:
    """GitHub's anchor for a heading's text."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # links -> their text
    text = re.sub(r"<[^>]+>", "", text).replace("`", "").strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: pathlib.Path) -> set[str]:
    """The anchors a Markdown file defines: heading slugs (GitHub's numbering) and HTML ids."""
    seen: dict[str, int] = {}
    out: set[str] = set()
    for _, line in _prose_lines(path.read_text(encoding="utf-8"), strip_code=False):
        m = _HEADING.match(line)
        if m:
            s = slug(m.group(2))
            n = seen.get(s, 0)
            seen[s] = n + 1
            out.add(s if n == 0 else f"{s}-{n}")
        out.update(_HTML_ID.findall(line))
    return out


def links(path: pathlib.Path) -> list[tuple[int, str]]:
    """``(line, target)`` of every inline link, image and reference definition."""
    out = []
    for i, line in _prose_lines(path.read_text(encoding="utf-8")):
        out += [(i, t) for t in _LINK.findall(line)]
        m = _REF_DEF.match(line)
        if m:
            out.append((i, m.group(1)))
    return out


def broken_links(root: pathlib.Path) -> list[str]:
    """Every relative link or anchor under ``root`` that does not resolve, as ``file:line``."""
    problems = []
    cache: dict[pathlib.Path, set[str]] = {}
    for md in markdown_files(root):
        for line, target in links(md):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):  # http:, https:, mailto:
                continue
            file_part, _, anchor = target.partition("#")
            dest = (md.parent / file_part).resolve() if file_part else md
            where = f"{md.relative_to(root)}:{line}: {target}"
            if not dest.exists():
                problems.append(f"{where} (no such file)")
                continue
            if anchor and dest.suffix == ".md":
                if dest not in cache:
                    cache[dest] = anchors(dest)
                if anchor not in cache[dest]:
                    problems.append(f"{where} (no anchor #{anchor})")
    return problems


def test_repository_markdown_links_resolve():
    files = markdown_files(ROOT)
    assert ROOT / "README.md" in files and ROOT / "BENCHMARKS.md" in files
    assert broken_links(ROOT) == []


def test_checker_finds_broken_files_and_anchors(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text(
        "# Title\n\n## The `step` API (v1)\n\n## Title\n\n```\n[x](missing.md)\n```\n"
    )
    (tmp_path / "README.md").write_text(
        "See [a](docs/a.md#the-step-api-v1), [b](docs/a.md#title-1), "
        "[c](docs/a.md#nope), [d](docs/gone.md), [e](https://example.org/x), "
        '`[f](inline.md)`, [g](#top)\n\n<a id="top"></a>\n\n[ref]: docs/missing.md\n'
    )
    assert broken_links(tmp_path) == [
        "README.md:1: docs/a.md#nope (no anchor #nope)",
        "README.md:1: docs/gone.md (no such file)",
        "README.md:5: docs/missing.md (no such file)",
    ]


@pytest.mark.parametrize(
    ("heading", "expected"),
    [
        ("Set-up", "set-up"),
        ("The vector env", "the-vector-env"),
        ("Speed with SB3 PPO (CartPole-v1)", "speed-with-sb3-ppo-cartpole-v1"),
        ("`RolloutCollector` and `scan`", "rolloutcollector-and-scan"),
        ("Fused steps, rollouts, benchmark", "fused-steps-rollouts-benchmark"),
    ],
)
def test_slug_matches_github(heading, expected):
    assert slug(heading) == expected
