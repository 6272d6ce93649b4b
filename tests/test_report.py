"""The benchmark report: a tiny sweep into JSON, rendering tables and plots from a JSON."""

from __future__ import annotations

import json
import pathlib

import pytest
import torch

from gpuvec_envs.bench import cli, measure, peer_gymnax, report, suites

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _row(env, impl, n, rate, setup=1.0, note=""):
    return {
        "env": env,
        "impl": impl,
        "num_envs": n,
        "steps_per_s": rate,
        "call_us": n / rate * 1e6,
        "setup_s": setup,
        "repeats": [rate],
        "frame_skip": 1,
        "note": note,
    }


def _fixture() -> dict:
    cp, pe = "gpuvec/CartPole-v1", "gpuvec/Pendulum-v1"
    return {
        "schema": 1,
        "command": "python -m gpuvec_envs.bench --suite report --json x.json",
        "machine": {
            "python": "3.11.7",
            "torch": "2.13.0+cpu",
            "gymnasium": "1.4.0",
            "numpy": "2.4.6",
            "torch_threads": 2,
            "OMP_NUM_THREADS": None,
            "cpu_count": 2,
            "cpu_model": "AMD EPYC",
            "isa": "AVX512",
            "date": "2026-12-01 22:00 UTC",
            "jax": "0.10.2",
            "gymnax": "1.0.1",
        },
        "load": {"loadavg_1m_before": 1.5, "loadavg_1m_after": None},
        "note": "Shared machine.",
        "settings": {"min_time": 1.0, "repeats": 5, "backend": "compile", "device": "cpu"},
        "wall_s": 300.0,
        "sections": [
            {
                "name": "scaling",
                "title": "CartPole scaling",
                "num_envs": [1, 4096],
                "rollout_num_envs": 4096,
                "rollout_steps": 32,
                "results": [
                    _row(cp, "gpuvec-compile", 1, 5e4),
                    _row(cp, "gpuvec-compile", 4096, 1.2e8),
                    _row(cp, "gpuvec-rollout-compile", 4096, 2.4e8, note="T=32"),
                    _row(cp, "gymnax-scan", 4096, 6e7),
                    _row(cp, "gymnax-step", 1, 1e4),
                    _row(cp, "gymnax-step", 4096, 3e7),
                    _row(cp, "gym-sync", 1, 6e4),
                    _row(cp, "gym-numpy", 4096, 2e7),
                ],
                "notes": [],
            },
            {
                "name": "classic",
                "title": "Classic",
                "num_envs": [65536],
                "rollout_num_envs": None,
                "rollout_steps": 32,
                "results": [
                    _row(pe, "gpuvec-compile", 65536, 1.5e8),
                    _row(pe, "gym-sync", 256, 8e4),
                ],
                "notes": ["gymnax peer skipped: ModuleNotFoundError: No module named 'jax'"],
            },
            {
                "name": "contended",
                "title": "CartPole contended",
                "num_envs": [65536],
                "rollout_num_envs": None,
                "rollout_steps": 32,
                "competitor": 1,
                "results": [
                    _row(cp, "gpuvec-compile", 65536, 4e7),
                    _row(cp, "gpuvec-compile-1t", 65536, 5e7),
                    _row(cp, "gym-numpy", 65536, 5e6),
                ],
                "notes": [],
            },
        ],
    }


def test_render_markdown_tables_from_fixture():
    text = report.render_markdown(_fixture(), {"scaling": "docs/results/scaling.png"})
    lines = text.splitlines()
    assert lines[0] == "# Benchmarks"
    assert report.REPORT_COMMAND in lines and report.RENDER_COMMAND in lines
    assert "| CPU | AMD EPYC, 2 CPUs, ISA AVX512 |" in lines
    assert "| threads | torch 2, OMP_NUM_THREADS unset |" in lines
    assert "| load (1-min average) | 1.50 before, n/a after |" in lines
    assert "| date | 2026-12-01 22:00 UTC |" in lines
    assert "![CartPole scaling](docs/results/scaling.png)" in lines
    # scaling table: one row per N, ratios against gymnax and numpy at the same N
    i = lines.index(
        "| num_envs | gpuvec-compile | gymnax-step | gym-sync | gym-numpy "
        "| gpuvec / gymnax | gpuvec / numpy |"
    )
    assert lines[i + 2] == "| 1 | 50k | 10k | 60k | - | 5.0x | - |"
    assert lines[i + 3] == "| 4096 | 120M | 30M | - | 20M | 4.0x | 6.0x |"
    # per-env summary: best of each, ratios
    assert (
        "| CartPole-v1 | 120M (N=4096) | 30M (N=4096) | 240M (N=4096) | 60M (N=4096) "
        "| 60k (N=1) | 4.0x | 4.0x | 2000x |"
    ) in lines
    assert "| Pendulum-v1 | 150M (N=65536) | - | - | - | 80k (N=256) | - | - | 1875x |" in lines
    assert "| Pendulum-v1 | gym-sync | 256 | 80k | 3200.0 | 1.00 | 0.00 |  |" in lines
    # a contended section: the default and 1-thread steps against the peer, its conditions
    i = lines.index("## CartPole contended")
    assert lines[i + 2].startswith("Timed while 1 busy process (`python -c")
    assert ("| CartPole-v1 | 65536 | 40M | 50M | 5M (gym-numpy, N=65536) | 8.0x | 0.8x |") in lines
    assert "- Note: gymnax peer skipped: ModuleNotFoundError: No module named 'jax'" in lines
    assert "Rollouts: T=32 steps of N=4096 envs per call." in lines


def test_render_writes_markdown_pngs_and_readme_table(tmp_path):
    src = tmp_path / "results" / "r.json"
    src.parent.mkdir()
    src.write_text(json.dumps(_fixture()))
    out, readme = tmp_path / "BENCH.md", tmp_path / "README.md"
    readme.write_text(f"# x\n\n{report.README_START}\nold\n{report.README_END}\ntail\n")
    rc = report.main(["render", str(src), "--out", str(out), "--readme", str(readme)])
    assert rc == 0
    md = out.read_text()
    for name in ("scaling", "classic"):
        png = src.parent / f"{name}.png"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert f"](results/{name}.png)" in md
    lines = readme.read_text().splitlines()
    assert "old" not in lines and lines[-1] == "tail"
    assert "| CartPole-v1 | 4096 | 120M | 240M | 30M | 60M | 60k | 2000x |" in lines
    assert "| Pendulum-v1 | 65536 | 150M | - | - | - | 80k | 1875x |" in lines
    assert lines[3].startswith("Measured on AMD EPYC (2 CPUs, AVX512), 2 torch threads")
    with pytest.raises(ValueError, match="speed-table"):
        report.update_readme("no markers", _fixture())


def test_committed_benchmarks_md_is_the_render_of_the_committed_json():
    data = json.loads((ROOT / "docs/results/cpu.json").read_text())
    plots = {s["name"]: f"docs/results/{s['name']}.png" for s in data["sections"]}
    plots = {k: v for k, v in plots.items() if (ROOT / v).exists()}
    gpu = report.load_gpu(str(ROOT / "docs/results/cpu.json"))
    assert report.render_markdown(data, plots, gpu) == (ROOT / "BENCHMARKS.md").read_text()
    readme = (ROOT / "README.md").read_text()
    assert report.update_readme(readme, data) == readme
    assert data["machine"]["isa"] and data["load"]["loadavg_1m_before"] is not None
    names = {r["impl"] for s in data["sections"] for r in s["results"]}
    assert {"gpuvec-compile", "gpuvec-rollout-compile", "gymnax-step", "gymnax-scan"} <= names


def test_tiny_sweep_json_and_gymnax_note(tmp_path, monkeypatch):
    monkeypatch.setattr(peer_gymnax, "gymnax_missing", lambda: "gymnax peer skipped: test")
    sec = suites.Section(
        "tiny",
        "Tiny",
        ("gpuvec/CartPole-v1",),
        (4,),
        peers=("sync", "numpy"),
        rollout_num_envs=4,
        rollout_steps=3,
    )
    path = tmp_path / "out" / "r.json"
    rep = suites.run_report(
        [sec], min_time=0.01, repeats=3, backend="eager", log=None, json_path=str(path)
    )
    data = json.loads(path.read_text())
    assert data["complete"] is True and data["sections"] == rep["sections"]
    (s,) = data["sections"]
    assert s["notes"] == ["gymnax peer skipped: test"]
    impls = [(r["impl"], r["num_envs"]) for r in s["results"]]
    assert impls == [
        ("gpuvec-eager", 4),
        ("gpuvec-rollout-eager", 4),
        ("gym-sync", 4),
        ("gym-numpy", 4),
    ]
    for r in s["results"]:
        assert r["steps_per_s"] > 0 and len(r["repeats"]) == 3
    roll = s["results"][1]
    # a rollout call is T x N env-steps
    assert roll["steps_per_s"] == pytest.approx(3 * 4 / (roll["call_us"] * 1e-6), rel=1e-6)
    assert data["machine"]["isa"] == torch.backends.cpu.get_cpu_capability()
    assert set(data["load"]) == {"loadavg_1m_before", "loadavg_1m_after"}
    assert report.render_markdown(data).startswith("# Benchmarks")


def test_suite_flag_needs_json():
    with pytest.raises(ValueError, match="--json"):
        cli.main(["--suite", "report"])


def test_linear_policy_matches_shapes_and_bounds():
    import gymnasium as gym

    box = gym.spaces.Box(-2.0, 2.0, (1,))
    pol = measure.LinearPolicy(gym.spaces.Box(-1, 1, (3,)), box)
    a = pol(torch.randn(5, 3) * 100)
    assert a.shape == (5, 1) and a.dtype == torch.float32
    assert bool(((a >= -2) & (a <= 2)).all())
    disc = measure.LinearPolicy(gym.spaces.Box(0, 1, (10, 10, 4), bool), gym.spaces.Discrete(3))
    obs = torch.zeros(6, 10, 10, 4, dtype=torch.bool)
    obs[:, 0, 0, 0] = True
    w = torch.from_numpy(measure.policy_weights(400, 3))
    assert torch.equal(disc(obs), w[0].argmax().expand(6))


def _gpu_fixture() -> dict:
    dk = "gpuvec/MiniGrid-DoorKey-8x8-v0"
    fixture = _fixture()
    fixture["machine"].update(gpu="NVIDIA H200", gpu_memory_gib=139.8, cuda="13.0", navix="4.0.0")
    fixture["sections"] = [
        {
            "name": "gpu_minigrid",
            "title": "GPU: MiniGrid at N=2^20",
            "num_envs": [1 << 20],
            "rollout_num_envs": None,
            "rollout_steps": 32,
            "results": [
                _row(dk, "gpuvec-compile", 1 << 20, 400e6, note="cuda_graph"),
                _row(dk, "navix-step", 1 << 20, 80e6),
            ],
            "notes": [],
        }
    ]
    cart = {"env": "gpuvec/CartPole-v1", "num_envs": 1 << 22, "steps_per_s": 15e9}
    fixture["gpu"] = {
        "copy_GBps": 4300.0,
        "bytes": [
            dict(cart, kernels=2, bytes_per_env_step=142.0, achieved_GBps=2130.0,
                 share_of_copy=2130 / 4300)
        ],
        "frame_skip": [
            dict(env=cart["env"], num_envs=1 << 22, sim_steps_ratio=6.0,
                 k1=dict(steps_per_s=15e9), k8=dict(steps_per_s=11.25e9))
        ],
        "second_n": dict(cart, num_envs=1 << 20, first_step_s=0.8),
        "dynamic_batch": [
            dict(env=cart["env"], num_envs=1 << 20, second_num_envs=3 << 18,
                 fixed=dict(steps_per_s=8e9), dynamic=dict(steps_per_s=7.5e9),
                 second=dict(num_envs=3 << 18, steps_per_s=6e9, first_step_s=0.9))
        ],
    }  # fmt: skip
    return fixture


def test_gpu_section_renders_navix_and_the_extras() -> None:
    lines = report.render_gpu(_gpu_fixture())
    assert lines[0] == "## GPU" and "NVIDIA H200 (139.8 GiB)" in lines[2]
    assert "navix 4.0.0" in lines[2]
    head = next(x for x in lines if x.startswith("| env | gpuvec step"))
    assert "navix step" in head and "step / navix" in head and "gym-sync" not in head
    assert any(x.startswith("| MiniGrid-DoorKey-8x8-v0 | 400M (N=1048576) |") and "| 5.0x |" in x
               for x in lines)  # fmt: skip
    assert "Device copy rate (1 GiB, read + written): 4300 GB/s." in lines
    assert any("142 B per env-step: 2130 GB/s = 50 % of the copy rate" in x for x in lines)
    assert any("frame_skip=8 | CartPole-v1 | 4194304 | 6.0x" in x for x in lines)
    assert "| first step at a second N (compile) | CartPole-v1 | 1048576 | 0.8 s |" in lines
    assert (
        "| `dynamic_batch` | CartPole-v1 | 1048576 | 7.5G env-steps/s vs 8G with a fixed "
        "N; at N=786432, first step 0.9 s, 6G env-steps/s |"
    ) in lines


def test_render_adds_the_gpu_section_when_gpu_json_lies_beside(tmp_path) -> None:
    (tmp_path / "cpu.json").write_text(json.dumps(_fixture()))
    out = tmp_path / "B.md"
    assert "## GPU" not in report.render(str(tmp_path / "cpu.json"), str(out))
    (tmp_path / "gpu.json").write_text(json.dumps(_gpu_fixture()))
    assert "\n## GPU\n" in report.render(str(tmp_path / "cpu.json"), str(out))
