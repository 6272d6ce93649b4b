"""The benchmark CLI end to end on a tiny sweep (autotune: test_autotune.py)."""

from __future__ import annotations

import json

import pytest

from gpuvec_envs.bench import cli, measure


def test_bench_cli_tiny_sweep_writes_json_and_png(tmp_path, capsys):
    out_json, out_png = tmp_path / "b.json", tmp_path / "b.png"
    rc = cli.main(
        [
            "--envs",
            "CartPole-v1",
            "--num-envs",
            "1,2^3",
            "--backends",
            "eager",
            "--frame-skip",
            "1,2",
            "--peers",
            "sync,numpy",
            "--min-time",
            "0.02",
            "--repeats",
            "3",
            "--json",
            str(out_json),
            "--plot",
            str(out_png),
            "--no-progress",
        ]
    )
    assert rc == 0
    data = json.loads(out_json.read_text())
    impls = {(r["impl"], r["num_envs"], r["frame_skip"]) for r in data["results"]}
    assert impls == {
        ("gpuvec-eager", 1, 1),
        ("gpuvec-eager", 8, 1),
        ("gpuvec-eager", 1, 2),
        ("gpuvec-eager", 8, 2),
        ("gym-sync", 1, 1),
        ("gym-sync", 8, 1),
        ("gym-numpy", 1, 1),
        ("gym-numpy", 8, 1),
    }
    for r in data["results"]:
        assert r["steps_per_s"] > 0 and len(r["repeats"]) == 3 and r["setup_s"] >= 0
        assert r["steps_per_s"] == sorted(r["repeats"])[1]  # the median
    ratio = next(x for x in data["ratios"] if x["num_envs"] == 8 and x["frame_skip"] == 1)
    same = next(r for r in data["results"] if r["impl"] == "gym-numpy" and r["num_envs"] == 8)
    gv = next(
        r
        for r in data["results"]
        if r["impl"] == "gpuvec-eager" and r["num_envs"] == 8 and r["frame_skip"] == 1
    )
    assert ratio["vs gym-numpy same N"] == pytest.approx(gv["steps_per_s"] / same["steps_per_s"])
    assert data["machine"]["torch_threads"] >= 1 and "command" in data["machine"]
    assert out_png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    printed = capsys.readouterr().out
    assert "| gpuvec/CartPole-v1 | gym-numpy | 1 | 8 |" in printed
    assert "vs gym-numpy same N" in printed


def test_time_interleaved_takes_one_block_of_each_configuration_per_repeat():
    log = []

    def opened(name, num_envs):
        result = measure.Result("gpuvec/CartPole-v1", name, num_envs, 0.0, 0.0, 0.0, [])
        return measure.Opened(result, lambda i: log.append((name, i)), lambda: None)

    a, b = opened("a", 4), opened("b", 8)
    measure.time_interleaved([a, b], min_time=0.003, repeats=3)
    blocks = [name for k, (name, _) in enumerate(log) if k == 0 or log[k - 1][0] != name]
    assert blocks == ["a", "b"] + ["a", "b"] * 3  # calibration, then the repeats in turn
    for o in (a, b):
        calls = [i for name, i in log if name == o.result.impl]
        assert calls == list(range(len(calls)))  # call indices run on across the blocks
        r = o.result
        assert len(r.repeats) == 3 and r.steps_per_s == sorted(r.repeats)[1]
        assert r.call_us == pytest.approx(r.num_envs / r.steps_per_s * 1e6)


def test_peer_caps_in_plan():
    args = cli.build_parser().parse_args(
        ["--num-envs", "1,64,4096", "--peer-max-envs", "64", "--async-max-envs", "2"]
    )
    jobs = cli.plan(args)
    sizes = {
        p: sorted(kw["num_envs"] for k, kw in jobs if kw.get("peer") == p) for p in measure.PEERS
    }
    assert sizes == {"sync": [1, 64], "async": [1, 2], "numpy": [1, 64, 4096], "envpool": [1, 64]}


def test_validate_flag_times_the_checked_env():
    args = cli.build_parser().parse_args(["--envs", "CartPole-v1", "--num-envs", "8"])
    assert all("validate" not in kw for k, kw in cli.plan(args) if k == "gpuvec")
    args = cli.build_parser().parse_args(
        ["--envs", "CartPole-v1", "--num-envs", "8", "--validate", "--backends", "eager"]
    )
    jobs = [kw for k, kw in cli.plan(args) if k == "gpuvec"]
    assert jobs and all(kw["validate"] is True for kw in jobs)
    opened = measure.open_gpuvec(**jobs[0])
    opened.close()
    assert opened.result.impl == "gpuvec-eager-validate"


def test_bench_competitor_threads_first_step_and_isa(tmp_path, capsys):
    import torch

    out_json = tmp_path / "c.json"
    rc = cli.main(
        [
            "--envs",
            "CartPole-v1",
            "--num-envs",
            "8",
            "--backends",
            "eager",
            "--num-threads",
            "auto,1",
            "--peers",
            "numpy",
            "--competitor",
            "1",
            "--min-time",
            "0.02",
            "--repeats",
            "3",
            "--json",
            str(out_json),
            "--no-progress",
        ]
    )
    assert rc == 0
    data = json.loads(out_json.read_text())
    assert data["machine"]["competitor_processes"] == 1
    assert data["machine"]["cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    impls = {r["impl"]: r for r in data["results"]}
    assert set(impls) == {"gpuvec-eager", "gpuvec-eager-1t", "gym-numpy"}
    assert impls["gpuvec-eager-1t"]["num_threads"] == "1"
    for name in ("gpuvec-eager", "gpuvec-eager-1t"):
        r = impls[name]
        assert 0 < r["first_step_s"] <= r["setup_s"]
    row = next(x for x in data["ratios"] if x["impl"] == "gpuvec-eager")
    assert row["vs gpuvec 1t same N"] == pytest.approx(
        impls["gpuvec-eager"]["steps_per_s"] / impls["gpuvec-eager-1t"]["steps_per_s"]
    )
    printed = capsys.readouterr().out
    assert "first step (s)" in printed
    assert f"| {measure.fmt_ratio(row['vs gpuvec 1t same N'])} |" in printed


@pytest.mark.parametrize(
    ("ratio", "text"), [(0.951, "0.95x"), (0.0123, "0.012x"), (12.44, "12.4x"), (127.4, "127x")]
)
def test_ratios_below_one_keep_two_digits(ratio, text):
    """0.95x must not print as 0.9x: a target such as "never below 0.9x" is read off it."""
    assert measure.fmt_ratio(ratio) == text


def test_busy_processes_are_gone_afterwards():
    with measure.busy_processes(2) as procs:
        assert all(p.poll() is None for p in procs)
    assert all(p.poll() is not None for p in procs)
