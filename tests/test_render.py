"""Rendering: every ID's frames, agreement with the references' frames, videos, human mode.

Reference frames come from gymnasium's pygame renderers and minatar's ``rgb_array`` for
the same states. Classic-control agreement is the fraction of equal pixels among the
*foreground* pixels (not white in either frame) whose reference colour is one of the scene's
colours (anti-aliased edge pixels, blends, are left out: ours has no anti-aliasing).
Measured over 20 random states per env: CartPole >= 0.982 (mean 0.994), Pendulum >= 0.984
(0.996), Acrobot >= 0.992 (0.997), MountainCar(-Continuous) >= 0.979 (0.988); a wrong
pose, a mirrored orientation or a wrong colour scores <= 0.85 (see the control tests).
MinAtar frames equal minatar's exactly.
"""

from __future__ import annotations

import os

os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
os.environ.setdefault("SDL_AUDIODRIVER", "dummy")

import functools
import importlib.util
import pathlib
import sys
from collections.abc import Callable

import gymnasium as gym
import imageio_ffmpeg
import numpy as np
import pytest
import torch
from gymnasium.error import DependencyNotInstalled
from registry_ids import GENERIC_IDS

from gpuvec_envs.core.vector import GpuVecEnv
from gpuvec_envs.envs.minatar import _common as _minatar
from gpuvec_envs.registry import REGISTRY
from gpuvec_envs.render.viewer import tile

EXAMPLES = pathlib.Path(__file__).resolve().parents[1] / "examples"
WHITE = (255, 255, 255)
ALL_IDS = GENERIC_IDS
SHAPES = {
    "CartPole": (400, 600),
    "Pendulum": (500, 500),
    "MountainCar": (400, 600),
    "MountainCarContinuous": (400, 600),
    "Acrobot": (500, 500),
}
MIN_AGREEMENT = 0.96
N_STATES = 16


def _frame_shape(env_id: str) -> tuple[int, int]:
    name = env_id.removeprefix("gpuvec/").split("-v")[0]
    if name.startswith("MiniGrid"):  # 32-pixel tiles
        env = _make(env_id, 1)
        width, height = env.env_def.dims(env.params)
        return height * 32, width * 32
    return (160, 160) if name.startswith("MinAtar") else SHAPES[name]


def _make(env_id: str, n: int, **kwargs) -> GpuVecEnv:
    return gym.make_vec(env_id, num_envs=n, backend="eager", **kwargs).unwrapped


# -- every ID -------------------------------------------------------------------------------
@pytest.mark.parametrize("env_id", ALL_IDS)
def test_every_id_renders_rgb_frames(env_id: str) -> None:
    env = _make(env_id, 3, render_mode="rgb_array")
    assert env.render() is None  # before reset, as gymnasium's envs
    env.reset(seed=1)
    for _ in range(3):
        env.step(env.action_space.sample())
    frames = env.render()
    h, w = _frame_shape(env_id)
    assert isinstance(frames, tuple) and len(frames) == 3
    assert all(f.shape == (h, w, 3) and f.dtype == np.uint8 for f in frames)
    batch = env.render_frames()
    assert batch.shape == (3, h, w, 3) and batch.dtype == torch.uint8
    assert batch.device == env.device
    np.testing.assert_array_equal(batch.numpy(), np.stack(frames))
    assert env.metadata["render_modes"] == ["human", "rgb_array"]
    assert env.metadata["render_fps"] > 0


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("env_id", ALL_IDS)
def test_every_id_renders_on_cuda_as_on_cpu(env_id: str) -> None:
    cpu = _make(env_id, 4, render_mode="rgb_array")
    gpu = _make(env_id, 4, render_mode="rgb_array", device="cuda")
    cpu.reset(seed=3)
    gpu.reset(seed=3)
    gpu.set_env_state(torch.utils._pytree.tree_map(lambda t: t.cuda(), cpu.state.env))
    frames = gpu.render_frames()
    assert frames.device.type == "cuda" and frames.dtype == torch.uint8
    ref = cpu.render_frames()
    assert (frames.cpu() == ref).all(-1).double().mean() >= 0.999  # sin/cos may differ


# -- agreement with gymnasium's pygame frames ------------------------------------------------
def agreement(ours: np.ndarray, ref: np.ndarray, colours: list[tuple[int, int, int]]) -> float:
    """Fraction of equal pixels among foreground pixels of a pure reference colour."""
    bg = np.array(WHITE, np.uint8)
    foreground = (ours != bg).any(-1) | (ref != bg).any(-1)
    pure = (ref == bg).all(-1)
    for c in colours:
        pure |= (ref == np.array(c, np.uint8)).all(-1)
    selected = foreground & pure
    return float((ours == ref).all(-1)[selected].mean())


def _cartpole(rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.uniform([-2.4, -1, -0.8, -1], [2.4, 1, 0.8, 1], (n, 4))


def _pendulum(rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.uniform([-np.pi, -1], [np.pi, 1], (n, 2))


def _acrobot(rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.uniform([-np.pi, -np.pi, -1, -1], [np.pi, np.pi, 1, 1], (n, 4))


def _mountain_car(rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.uniform([-1.2, -0.07], [0.6, 0.07], (n, 2))


CLASSIC = {
    # id: (state sampler, scene colours, a wrong pose: perturbed state)
    "CartPole-v1": (
        _cartpole,
        [(0, 0, 0), (202, 152, 101), (129, 132, 203)],
        lambda s: s + [0.0, 0, 0.15, 0],
    ),
    "Pendulum-v1": (_pendulum, [(0, 0, 0), (204, 77, 77)], lambda s: s + [0.15, 0]),
    "Acrobot-v1": (
        _acrobot,
        [(0, 0, 0), (0, 204, 204), (204, 204, 0)],
        lambda s: s + [0.0, 0.15, 0, 0],
    ),
    "MountainCar-v0": (
        _mountain_car,
        [(0, 0, 0), (128, 128, 128), (204, 204, 0)],
        lambda s: s + [0.04, 0],
    ),
    "MountainCarContinuous-v0": (
        _mountain_car,
        [(0, 0, 0), (128, 128, 128), (204, 204, 0)],
        lambda s: s + [0.04, 0],
    ),
}
MIRRORS = {  # the orientation flipped
    "CartPole-v1": lambda s: s * [1, 1, -1, 1],
    "Pendulum-v1": lambda s: s * [-1, 1],
    "Acrobot-v1": lambda s: s * [-1, -1, 1, 1],
}


def _classic_frames(
    env_id: str, states: np.ndarray
) -> tuple[list[np.ndarray], Callable[[np.ndarray], np.ndarray]]:
    """The reference's frames of ``states`` and a function rendering ours of any states."""
    ref = gym.make(env_id, render_mode="rgb_array").unwrapped
    ref.reset(seed=0)
    ref_frames = []
    for s in states:
        ref.state = s.copy()
        ref.last_u = None  # Pendulum: no torque arrow (our state has no last action)
        ref_frames.append(ref.render())
    ref.close()
    env = _make(f"gpuvec/{env_id}", len(states), render_mode="rgb_array", dtype="float64")
    env.reset(seed=0)

    def ours(s: np.ndarray) -> np.ndarray:
        fields = type(env.state.env)
        env.set_env_state(fields(*(torch.tensor(c) for c in s.T)))
        return env.render_frames().numpy()

    return ref_frames, ours


@pytest.mark.parametrize("env_id", list(CLASSIC))
def test_classic_frames_agree_with_gymnasium(env_id: str) -> None:
    pytest.importorskip("pygame")
    sampler, colours, _ = CLASSIC[env_id]
    states = sampler(np.random.default_rng(7), N_STATES)
    ref, ours = _classic_frames(env_id, states)
    scores = [agreement(o, r, colours) for o, r in zip(ours(states), ref, strict=True)]
    assert min(scores) >= MIN_AGREEMENT, scores


@pytest.mark.parametrize("env_id", list(CLASSIC))
def test_agreement_fails_on_a_wrong_pose_orientation_or_colour(env_id: str) -> None:
    pytest.importorskip("pygame")
    sampler, colours, wrong_pose = CLASSIC[env_id]
    states = sampler(np.random.default_rng(8), 8)
    ref, ours = _classic_frames(env_id, states)
    controls = {"pose": ours(wrong_pose(states))}
    if env_id in MIRRORS:
        controls["mirror"] = ours(MIRRORS[env_id](states))
    recoloured = ours(states).copy()
    recoloured[..., 0] = np.where(recoloured[..., 0] < 255, 255 - recoloured[..., 0], 255)
    controls["colour"] = recoloured
    for name, frames in controls.items():
        scores = [agreement(o, r, colours) for o, r in zip(frames, ref, strict=True)]
        assert max(scores) < MIN_AGREEMENT and np.mean(scores) <= 0.85, (name, scores)


# -- MinAtar: minatar's own rgb_array, exactly -----------------------------------------------
MINATAR = [e for e in REGISTRY if e.id.startswith("gpuvec/MinAtar") and e.id.endswith("v1")]


@pytest.mark.parametrize("entry", MINATAR, ids=lambda e: e.id)
def test_minatar_frames_equal_minatar_rgb_array(entry) -> None:
    pytest.importorskip("seaborn")
    from minatar.gym import register_envs

    if entry.reference not in gym.registry:
        register_envs()
    env = _make(entry.id, 6, render_mode="rgb_array")
    obs, _ = env.reset(seed=2)
    ref = gym.make(entry.reference, render_mode="rgb_array").unwrapped
    ref.reset(seed=0)
    k = _minatar.CELL_PIXELS
    for _ in range(25):
        obs, *_ = env.step(env.action_space.sample())
        frames = env.render_frames().numpy()
        for i, o in enumerate(obs.numpy()):
            ref.game.state = functools.partial(np.copy, o)  # minatar renders game.state()
            expected = np.round(ref.render() * 255).astype(np.uint8)
            np.testing.assert_array_equal(frames[i][::k, ::k], expected)
            np.testing.assert_array_equal(frames[i], expected.repeat(k, 0).repeat(k, 1))


def test_minatar_palette_is_seaborn_cubehelix() -> None:
    sns = pytest.importorskip("seaborn")
    for n in (4, 6, 7, 10):
        expected = np.round(np.array([(0, 0, 0), *sns.color_palette("cubehelix", n)]) * 255)
        np.testing.assert_array_equal(np.array(_minatar.palette(n)), expected)


# -- the shell: subsets, the tensor batch, bad input ---------------------------------------
def test_render_subsets_and_tensor_batch() -> None:
    env = _make("gpuvec/CartPole-v1", 5, render_mode="rgb_array")
    env.reset(seed=0)
    full = env.render_frames()
    np.testing.assert_array_equal(env.render([3, 1])[0], full[3].numpy())
    sub = env.render_frames(torch.tensor([4, 4, 0]))
    assert torch.equal(sub, full[[4, 4, 0]])
    assert torch.equal(env.render_frames([]), full[:0])
    assert len({f.tobytes() for f in env.render()}) == 5  # five different states
    plain = _make("gpuvec/CartPole-v1", 2)  # no render_mode: render() is None, frames work
    plain.reset(seed=0)
    assert plain.render() is None and plain.render_frames().shape == (2, 400, 600, 3)


def test_render_frames_rejects_bad_indices() -> None:
    env = _make("gpuvec/Acrobot-v1", 3, render_mode="rgb_array")
    with pytest.raises(RuntimeError, match="reset"):
        env.render_frames()
    env.reset(seed=0)
    for bad, exc in [
        ([0, 3], ValueError),
        ([-1], ValueError),
        ([0.5], TypeError),
        ([True], TypeError),
        (torch.tensor([0.0]), TypeError),
        (torch.tensor([[0]]), TypeError),
        (torch.tensor([5]), ValueError),
    ]:
        with pytest.raises(exc, match="render indices"):
            env.render_frames(bad)


def test_tile_matches_sb3() -> None:
    from stable_baselines3.common.vec_env.base_vec_env import tile_images

    frames = torch.randint(0, 256, (5, 3, 4, 3), dtype=torch.uint8)
    np.testing.assert_array_equal(tile(frames).numpy(), tile_images(list(frames.numpy())))


# -- videos through gymnasium's and SB3's recorders, real encoder ----------------------------
def _video_frames(path: str) -> list[np.ndarray]:
    reader = imageio_ffmpeg.read_frames(path)
    meta = next(reader)
    w, h = meta["size"]
    return [np.frombuffer(f, np.uint8).reshape(h, w, 3) for f in reader]


def test_gymnasium_vector_record_video_writes_mp4(tmp_path) -> None:
    pytest.importorskip("moviepy")
    envs = gym.make_vec("gpuvec/CartPole-v1", num_envs=4, render_mode="rgb_array", backend="eager")
    envs = gym.wrappers.vector.RecordVideo(
        envs, str(tmp_path), step_trigger=lambda t: t == 0, video_length=10
    )
    envs.reset(seed=0)
    for _ in range(12):
        envs.step(envs.action_space.sample())
    envs.close()
    (video,) = tmp_path.glob("*.mp4")
    frames = _video_frames(str(video))
    assert len(frames) == 10 and frames[0].shape == (800, 1200, 3)  # 2x2 tiles of 400x600


def test_single_env_record_video_writes_mp4(tmp_path) -> None:
    pytest.importorskip("moviepy")
    env = gym.make("gpuvec/Pendulum-v1", render_mode="rgb_array", max_episode_steps=20)
    env = gym.wrappers.RecordVideo(env, str(tmp_path), episode_trigger=lambda e: e == 0)
    env.reset(seed=0)
    for _ in range(20):
        *_, term, trunc, _ = env.step(env.action_space.sample())
    assert trunc
    env.close()
    (video,) = tmp_path.glob("*.mp4")
    frames = _video_frames(str(video))
    assert len(frames) == 21 and frames[0].shape == (500, 500, 3)  # reset + 20 steps


def test_sb3_vec_video_recorder_writes_mp4(tmp_path) -> None:
    pytest.importorskip("moviepy")
    from stable_baselines3.common.vec_env import VecVideoRecorder

    from gpuvec_envs.adapters.sb3 import make_sb3_vec_env

    env = make_sb3_vec_env(
        "MinAtar-Breakout-v1",
        n_envs=4,
        seed=0,
        backend="eager",
        env_kwargs={"render_mode": "rgb_array"},
    )
    env = VecVideoRecorder(env, str(tmp_path), lambda step: step == 0, video_length=8)
    env.reset()
    for _ in range(10):
        env.step(np.array([env.action_space.sample() for _ in range(4)]))
    env.close()
    (video,) = tmp_path.glob("*.mp4")
    frames = _video_frames(str(video))
    assert len(frames) == 9 and frames[0].shape == (320, 320, 3)  # reset + 8; 2x2 tiles


# -- human mode -------------------------------------------------------------------------------
def test_human_mode_shows_a_pygame_window() -> None:
    pygame = pytest.importorskip("pygame")
    env = gym.make_vec("gpuvec/MountainCar-v0", num_envs=3, render_mode="human", backend="eager")
    env.reset(seed=0)
    env.step(np.ones(3, dtype=np.int64))
    assert env.render() is None
    surface = pygame.display.get_surface()
    assert surface.get_size() == (1200, 800)  # 2x2 tiles of 600x400
    shown = pygame.surfarray.array3d(surface).transpose(1, 0, 2)
    np.testing.assert_array_equal(shown, tile(env.unwrapped.render_frames()).numpy())
    env.close()
    single = gym.make("gpuvec/CartPole-v1", render_mode="human")
    single.reset(seed=0)
    single.step(0)
    assert single.render() is None
    single.close()


def test_human_mode_without_pygame_names_the_alternative(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "pygame", None)
    with pytest.raises(DependencyNotInstalled, match="rgb_array"):
        gym.make_vec("gpuvec/CartPole-v1", num_envs=2, render_mode="human")
    with pytest.raises(ValueError, match="render_mode"):
        gym.make_vec("gpuvec/CartPole-v1", num_envs=2, render_mode="ansi")


# -- the CleanRL examples' --capture-video ----------------------------------------------------
EXAMPLE_RUNS = {
    "cleanrl_ppo": (
        "--rollout loop --no-compile-update --total-timesteps 256 --num-envs 4 --num-steps 64",
        (400, 600),
    ),
    "cleanrl_ppo_continuous_action": (
        "--total-timesteps 256 --num-envs 2 --num-steps 128 --num-minibatches 2 --update-epochs 1",
        (500, 500),
    ),
    "minatar_ppo": (
        "--total-timesteps 256 --num-envs 4 --num-steps 64 --num-minibatches 2 --update-epochs 1",
        (160, 160),
    ),
}


@pytest.mark.parametrize("name", list(EXAMPLE_RUNS))
def test_example_capture_video_records_an_episode(name: str, tmp_path) -> None:
    pytest.importorskip("moviepy")
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    args, shape = EXAMPLE_RUNS[name]
    result = module.main(
        f"{args} --step-backend eager --no-cuda --quiet --capture-video "
        f"--video-dir {tmp_path}".split()
    )
    (video,) = result["videos"]
    frames = _video_frames(str(video))
    assert len(frames) >= 2 and frames[0].shape == (*shape, 3)
