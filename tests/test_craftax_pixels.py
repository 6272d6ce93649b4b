"""Craftax-Classic's pixels against craftax 1.6.1 (jax CPU): the Pixels ID and ``rgb_array``.

- :func:`~gpuvec_envs.envs.craftax.pixels.render_pixels` equal to craftax's
  ``render_craftax_pixels`` under ``jit(vmap)``, bit for bit, at 7 px (the observation) and
  64 px (``rgb_array``), on generated worlds, varied injected states (day and night,
  sleeping, mobs and arrows in and around the view, inventories 0-9) and the states they
  reach after random steps;
- ``gpuvec/Craftax-Classic-Pixels-v1`` through the shell: observations equal to craftax's
  ``CraftaxClassicPixelsEnvNoAutoReset`` over a trajectory, and across an autoreset;
- ``rgb_array`` frames of both IDs, and bad render use.

craftax's texture loader runs once per block size (its cache of all sizes is not written:
``load_all_textures`` is replaced by a loader of the sizes asked for). Unmarked tests share
the jitted references (module fixtures); larger sweeps are ``heavy``.
"""

from __future__ import annotations

import functools
import os
import pathlib
import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest
import torch

import gpuvec_envs  # noqa: F401 - registers the IDs
from gpuvec_envs.envs.craftax import _threefry as tf
from gpuvec_envs.envs.craftax import classic, pixels
from gpuvec_envs.envs.craftax.step import craftax_step
from gpuvec_envs.envs.craftax.worldgen import generate_world

PIXELS = "gpuvec/Craftax-Classic-Pixels-v1"
SYMBOLIC = "gpuvec/Craftax-Classic-Symbolic-v1"
CPU = torch.device("cpu")


def make(env_id: str, n: int, **kwargs):
    kwargs.setdefault("backend", "eager")
    return gym.make_vec(env_id, num_envs=n, **kwargs).unwrapped


def _actions(seed: int, steps: int, n: int) -> torch.Tensor:
    return torch.randint(0, 17, (steps, n), generator=torch.Generator().manual_seed(seed))


def _bits_equal(got: torch.Tensor | np.ndarray, want, msg: str = "") -> None:
    got = np.asarray(got)
    want = np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype == np.float32, msg
    bad = got.view(np.int32) != want.view(np.int32)
    assert not bad.any(), f"{msg}: {bad.sum()} values differ in {np.unique(np.nonzero(bad)[0])}"


# -- without jax --------------------------------------------------------------------------
def test_spaces_render_modes_and_obs_range():
    env = make(PIXELS, 3)
    assert env.single_observation_space == gym.spaces.Box(0.0, 1.0, (63, 63, 3), np.float32)
    assert env.single_action_space == gym.spaces.Discrete(17)
    assert env.spec.max_episode_steps == 10000
    obs, info = env.reset(seed=0)
    assert obs.shape == (3, 63, 63, 3) and obs.dtype == torch.float32 and info == {}
    assert 0 <= float(obs.min()) and float(obs.max()) <= 1
    for env_id in (PIXELS, SYMBOLIC):
        assert make(env_id, 1).metadata["render_modes"] == ["rgb_array"]


def test_pixels_need_neither_jax_nor_craftax():
    """The textures ship with the package: rendering imports neither jax nor craftax."""
    code = (
        "import sys, torch\n"
        "from gpuvec_envs.envs.craftax import pixels as p\n"
        "assert p.textures(7, torch.device('cpu')).block.shape == (17, 7, 7, 3)\n"
        "assert p.textures(64, torch.device('cpu')).block.shape == (17, 64, 64, 3)\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('jax', 'craftax')))\n"
    )
    root = str(pathlib.Path(__file__).resolve().parents[1])
    env = dict(os.environ, PYTHONPATH=root, OMP_NUM_THREADS="1")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_bad_render_use_raises():
    with pytest.raises(ValueError, match="render_mode 'human' not in"):
        make(PIXELS, 2, render_mode="human")
    env = make(PIXELS, 2, render_mode="rgb_array")
    assert env.render() is None  # before the first reset, as gymnasium's envs
    with pytest.raises(RuntimeError, match="reset"):
        env.render_frames()
    env.reset(seed=0)
    with pytest.raises(ValueError):
        env.render_frames([2])
    with pytest.raises(ValueError, match="block size 13"):
        pixels.textures(13, CPU)


def test_step_leaves_the_key_the_render_read():
    """Rendering reads ``state.state_rng`` and draws nothing: a step's state equals the
    Symbolic ID's bit for bit."""
    a, b = make(PIXELS, 2), make(SYMBOLIC, 2)
    for e in (a, b):
        e.reset(seed=3)
    for t in range(3):
        act = _actions(9, 3, 2)[t]
        a.step(act), b.step(act)
    for x, y in zip(a.state.env, b.state.env, strict=True):
        assert torch.equal(x, y)


def _worlds_and_steps(device: str, n: int = 6, steps: int = 6) -> list:
    """Generated worlds and the states of ``steps`` random steps, on ``device``."""
    params = classic.CraftaxParams()
    state = generate_world(tf.prng_key(torch.arange(n, device=device) + 50), params)
    # evening: the night noise is drawn and shown
    state = state._replace(timestep=state.timestep + 200)
    states = [state]
    acts = _actions(3, steps, n).to(device)
    for t in range(steps):
        state, _ = craftax_step(state.state_rng, state, acts[t], params)
        states.append(state._replace(state_rng=state.state_rng.contiguous()))
    return states


def test_render_is_batch_independent():
    """Env i's pixels are the same alone and in a batch, at 7 and 64 px."""
    state = _worlds_and_steps("cpu")[-1]
    assert (state.light_level < 0.5).any()
    for size in (7, 64):
        tex = pixels.textures(size, CPU)
        batch = pixels.render_pixels(state, tex)
        alone = pixels.render_pixels(type(state)(*(x[4:5] for x in state)), tex)
        assert torch.equal(batch[4:5].view(torch.int32), alone.view(torch.int32))


def test_traced_observation_equals_eager():
    """Traced with fake tensors (as the compiled backend traces the step), the observation
    builds its textures inside the trace; the graph computes the eager bits."""
    from torch.fx.experimental.proxy_tensor import make_fx

    env_def, params = classic.CraftaxClassicPixels(), classic.CraftaxParams()
    state = _worlds_and_steps("cpu", n=3, steps=1)[-1]
    graph = make_fx(lambda s: env_def.observation(params, s), tracing_mode="fake")(state)
    want = env_def.observation(params, state)
    assert torch.equal(graph(state).view(torch.int32), want.view(torch.int32))


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_render_equals_cpu_bitwise():
    """Pixels at 7 and 64 px on CUDA equal the CPU's bit for bit (worlds, then steps)."""
    cpu_states, cuda_states = _worlds_and_steps("cpu"), _worlds_and_steps("cuda")
    for size in (7, 64):
        for a, b in zip(cpu_states, cuda_states, strict=True):
            x = pixels.render_pixels(a, pixels.textures(size, CPU))
            y = pixels.render_pixels(b, pixels.textures(size, torch.device("cuda"))).cpu()
            assert torch.equal(x.view(torch.int32), y.view(torch.int32)), size


# -- against craftax ----------------------------------------------------------------------
@pytest.fixture(scope="module")
def ref():
    """craftax's renderer at 7 and 64 px and its Pixels env, ``jit(vmap)``."""
    jax = pytest.importorskip("jax")
    pytest.importorskip("craftax")
    import craftax.craftax_classic.constants as cc
    import craftax.craftax_classic.renderer as cr

    import tests.craftax_common as common

    @functools.cache
    def load(size: int):
        return cc.load_all_textures_given_size(size)

    class _Sizes(dict):
        def __missing__(self, size: int):
            return load(size)

    with pytest.MonkeyPatch.context() as mp:
        # craftax would build all three sizes and write its cache into site-packages
        mp.setattr(cr, "load_all_textures", lambda: _Sizes())
        from craftax.craftax_classic.envs.craftax_pixels_env import (
            CraftaxClassicPixelsEnvNoAutoReset,
        )

        env = CraftaxClassicPixelsEnvNoAutoReset()
        render7 = jax.jit(jax.vmap(cr.make_craftax_pixel_renderer(7)))
        render64 = jax.jit(jax.vmap(cr.make_craftax_pixel_renderer(64)))
    params = env.default_params
    reset = jax.jit(jax.vmap(env.reset_env, in_axes=(0, None)))
    step = jax.jit(jax.vmap(env.step_env, in_axes=(0, 0, 0, None)))

    class Ref:
        to_craftax = staticmethod(common.to_craftax)
        random_states = staticmethod(common.random_states)

        @staticmethod
        def render(state, size: int = 7) -> np.ndarray:
            out = []
            for i in range(0, state.map.shape[0], 8):  # batches of 8: one jit per shape
                part = type(state)(*(x[i : i + 8] for x in state))
                fn = render7 if size == 7 else render64
                out.append(np.asarray(fn(common.to_craftax(part))))
            return np.concatenate(out)

        @staticmethod
        def reset(keys: torch.Tensor):
            return reset(jax.numpy.asarray(keys.numpy().astype(np.uint32)), params)

        @staticmethod
        def step(state, action: torch.Tensor):
            # strong-typed arrays whatever made the state (reset, step, to_craftax): one jit
            state = jax.tree.map(lambda x: jax.numpy.asarray(np.asarray(x)), state)
            return step(state.state_rng, state, jax.numpy.asarray(action.numpy()), params)

    return Ref


def _pad8(state):
    """``state`` padded to a multiple of 8 envs (repeating the last), for shared jits."""
    n = state.map.shape[0]
    extra = -n % 8
    return type(state)(*(torch.cat([x, x[-1:].expand(extra, *x.shape[1:])]) for x in state))


def _check_render(ref, state, size: int = 7) -> None:
    state = _pad8(state)
    got = pixels.render_pixels(state, pixels.textures(size, CPU))
    _bits_equal(got, ref.render(state, size), f"{size} px")


def _varied(seed: int, n: int, steps: int):
    """Varied injected states and the states our step (craftax's, bit for bit) takes
    them to under random actions: a list of ``steps + 1`` batches."""
    states = [pixels_ready(seed, n)]
    acts = _actions(seed, steps, n)
    for t in range(steps):
        nxt, _ = craftax_step(states[-1].state_rng, states[-1], acts[t], classic.CraftaxParams())
        states.append(nxt._replace(state_rng=nxt.state_rng.contiguous()))
    return states


def pixels_ready(seed: int, n: int):
    """``random_states`` with some extreme values: intrinsics 9 and 0, an empty and a full
    inventory, a dead player (health -1, as at a terminal step)."""
    import tests.craftax_common as common

    s = common.random_states(seed, n)
    health = s.player_health.clone()
    health[:3] = torch.tensor([9, 0, -1])
    inv = s.inventory.clone()
    inv[0], inv[1] = 9, 0
    return s._replace(player_health=health, inventory=inv)


def test_generated_worlds_render_like_craftax(ref):
    """24 generated worlds (reset states: day, mobs and plants where generated)."""
    state = generate_world(tf.prng_key(torch.arange(24)))
    _check_render(ref, state)


def test_varied_states_render_like_craftax(ref):
    """16 varied states and the 4 steps after them (night noise, sleeping, mobs, arrows
    flying in all directions, inventories 0-9, a dead player): 80 states, bit for bit."""
    states = _varied(1, 16, 4)
    lights = torch.cat([s.light_level for s in states])
    assert (lights < 0.5).any() and (lights > 0.5).any()
    assert torch.cat([s.is_sleeping for s in states]).any()
    assert torch.cat([s.arrows_mask for s in states]).any()
    for s in states:
        _check_render(ref, s)


def test_human_size_renders_like_craftax(ref):
    """At 64 px (``rgb_array``): 8 varied states, bit for bit."""
    _check_render(ref, pixels_ready(2, 8), 64)


def test_pixels_id_trajectory_equals_craftax(ref):
    """Seeds 0-7: reset and 12 random steps, observations bit for bit equal to craftax's
    ``CraftaxClassicPixelsEnvNoAutoReset`` (its ``render / 255.0``), rewards and flags equal."""
    n = 8
    env = make(PIXELS, n, validate=False)
    obs, _ = env.reset(seed=0)
    want_obs, state = ref.reset(classic.seed_keys(torch.arange(n)))
    _bits_equal(obs, want_obs, "reset")
    acts = _actions(4, 12, n)
    for t in range(12):
        obs, reward, term, trunc, _ = env.step(acts[t])
        want_obs, state, want_r, done, _ = ref.step(state, acts[t])
        _bits_equal(obs, want_obs, f"step {t}")
        np.testing.assert_array_equal(reward.numpy(), np.asarray(want_r))
        np.testing.assert_array_equal((term | trunc).numpy(), np.asarray(done))


def test_pixels_id_autoreset_equals_craftax(ref):
    """Same-step autoreset: the final observations of dying envs are craftax's step
    observations, the new ones craftax's reset observations of the documented keys."""
    n = 8
    env = make(PIXELS, n, autoreset_mode="same_step", validate=False)
    env.reset(seed=20)
    env.step(torch.zeros(n, dtype=torch.int64))
    s = env.state.env
    dying = torch.arange(n) % 2 == 0

    def zero(x: torch.Tensor) -> torch.Tensor:
        return torch.where(dying, 0, x)

    s = s._replace(
        player_health=zero(s.player_health),
        player_food=zero(s.player_food),
        player_drink=zero(s.player_drink),
        player_energy=zero(s.player_energy),
    )
    env.set_env_state(s)
    counter = env.state.counter.clone()
    act = _actions(6, 1, n)[0]
    obs, _, term, _, info = env.step(act)
    want_final, _, _, done, _ = ref.step(ref.to_craftax(s), act)
    assert torch.equal(term, torch.as_tensor(np.array(done))) and term[dying].all()
    final = info["final_obs"]
    _bits_equal(final[term], np.asarray(want_final)[term.numpy()], "final_obs")
    keys = tf.fold_in(tf.fold_in(classic.seed_keys(torch.arange(20, 20 + n)), 0x43524654), counter)
    want_reset, _ = ref.reset(keys)
    _bits_equal(obs[term], np.asarray(want_reset)[term.numpy()], "reset obs")
    _bits_equal(obs[~term], np.asarray(want_final)[~term.numpy()], "continuing obs")


@pytest.mark.parametrize("env_id", [PIXELS, SYMBOLIC])
def test_rgb_array_equals_craftax(ref, env_id, monkeypatch):
    """``render()``: one (576, 576, 3) uint8 frame per env, craftax's 64 px render
    truncated to integers (numpy's ``astype(uint8)``), drawn in chunks of envs or not;
    ``render_frames`` keeps the batch."""
    env = make(env_id, 8, render_mode="rgb_array")
    env.reset(seed=5)
    env.set_env_state(pixels_ready(3, 8))
    frames = env.render()
    assert len(frames) == 8 and frames[0].shape == (576, 576, 3) and frames[0].dtype == np.uint8
    want = ref.render(env.state.env, 64).astype(np.uint8)
    np.testing.assert_array_equal(np.stack(frames), want)
    monkeypatch.setattr(classic, "RENDER_CHUNK", 3)  # chunks of 3, 3 and 2 envs
    np.testing.assert_array_equal(np.stack(env.render()), want)
    sub = env.render_frames([6, 1])
    assert sub.shape == (2, 576, 576, 3) and sub.dtype == torch.uint8
    np.testing.assert_array_equal(sub.numpy(), want[[6, 1]])


@pytest.mark.heavy
def test_many_states_render_like_craftax(ref):
    """256 varied states and 30 steps after each, at 7 px; 64 states at 64 px."""
    for s in _varied(7, 256, 30):
        _check_render(ref, s)
    _check_render(ref, pixels_ready(8, 64), 64)


@pytest.mark.heavy
def test_long_pixels_trajectory_equals_craftax(ref):
    """Seeds 100-107: 300 random steps (a day's length: dusk and night), bit for bit."""
    n = 8
    env = make(PIXELS, n, validate=False, autoreset_mode="disabled")
    obs, _ = env.reset(seed=100)
    want_obs, state = ref.reset(classic.seed_keys(torch.arange(100, 100 + n)))
    _bits_equal(obs, want_obs, "reset")
    acts = _actions(8, 300, n)
    for t in range(300):
        obs, *_ = env.step(acts[t])
        want_obs, state, *_ = ref.step(state, acts[t])
        _bits_equal(obs, want_obs, f"step {t}")
