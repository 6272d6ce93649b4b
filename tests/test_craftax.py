"""Craftax-Classic foundations against the reference (craftax 1.6.1 on jax 0.10.2, CPU).

- ``_threefry``: jax's key stream and samplers, bit for bit, for many keys and shapes;
- ``worldgen``: the generated world (map, player, mobs, intrinsics, keys) equal to
  ``craftax_classic.world_gen.generate_world`` for many seeds, bit for bit.

jax compiles each function once per shape (seconds); the unmarked tests share compiled
functions through module-scoped fixtures, the seed sweeps are marked ``heavy``.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")
pytest.importorskip("craftax")

import craftax_common as cc  # noqa: E402
from minatar_common import single_thread  # noqa: E402

from gpuvec_envs.envs.craftax import _threefry as tf  # noqa: E402

# small eager batches: one torch thread, immune to OpenMP contention beside other workers
pytestmark = pytest.mark.usefixtures("single_thread")
__all__ = ["single_thread"]

SEEDS = [0, 1, 2, 7, 42, 123, 2**31 - 1, 2**31, 2**32 - 1, 987654321]


def _keys(seeds: list[int]) -> tuple[torch.Tensor, np.ndarray]:
    """Our keys and jax's raw keys for the same seeds: (N, 2) int64, (N, 2) uint32."""
    ours = tf.prng_key(torch.tensor(seeds, dtype=torch.int64))
    theirs = np.stack([np.asarray(jax.random.PRNGKey(s)) for s in seeds])
    return ours, theirs


def _eq(ours: torch.Tensor, theirs) -> None:
    """Exact equality, uint32 compared as int64 values, floats bit for bit."""
    theirs = np.asarray(theirs)
    if theirs.dtype == np.uint32:
        theirs = theirs.astype(np.int64)
    expected = torch.from_numpy(np.array(theirs))
    assert ours.shape == expected.shape
    if ours.dtype.is_floating_point:
        assert ours.dtype == expected.dtype
        torch.testing.assert_close(
            ours.view(torch.int32), expected.view(torch.int32), rtol=0, atol=0
        )
    else:
        torch.testing.assert_close(ours.to(torch.int64), expected.to(torch.int64), rtol=0, atol=0)


def test_jax_defaults_are_the_mirrored_ones() -> None:
    assert jax.config.jax_threefry_partitionable is True
    assert jax.config.jax_enable_x64 is False


@pytest.fixture(params=[pytest.param("kernel", marks=pytest.mark.heavy), "ops"])
def threefry_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run ``gpuvec::threefry2x32`` as its compiled kernel, then as torch operations."""
    monkeypatch.setattr(tf, "COMPILED_KERNEL", request.param == "kernel")
    if request.param == "ops":
        monkeypatch.setattr(tf, "_KERNELS", {})  # and none gets built
    return request.param


def _threefry_words() -> list[torch.Tensor]:
    """Four int64 ``(5, 7)`` words: the extremes and random uint32 values."""
    g = torch.Generator().manual_seed(3)
    words = [torch.randint(0, 2**32, (5, 7), generator=g) for _ in range(4)]
    for w in words:
        w[0, :3] = torch.tensor([0, 1, 2**32 - 1])
    return words


@pytest.mark.parametrize("wrap", [True, False])
def test_threefry2x32_ops_equal_jax(wrap: bool) -> None:
    from jax._src.random.threefry2x32 import threefry2x32_p

    words = _threefry_words()
    theirs = threefry2x32_p.bind(*(jnp.asarray(w.numpy().astype(np.uint32)) for w in words))
    for ours, expected in zip(tf.threefry2x32_ops(*words, wrap=wrap), theirs, strict=True):
        _eq(ours, expected)


def test_threefry2x32_op_broadcasts_like_the_ops(threefry_path: str) -> None:
    k0, k1, x0, x1 = _threefry_words()
    cases = [
        (k0[:, :1], k1[:, :1], x0[0], x1[0]),  # split's and random_bits' pattern: (5, 7)
        (k0, k1, torch.tensor(0), torch.tensor(5)),  # fold_in's
        (k0[0, 0], k1[0, 0], x0[0, 0], x1[0, 0]),  # one word: ()
        (k0[:, :1], k1[:, :1], x0[0, :0], x1[0, :0]),  # nothing: (5, 0)
    ]
    for words in cases:
        shape = torch.broadcast_shapes(*(w.shape for w in words))
        for ours, expected in zip(
            tf.threefry2x32(*words), tf.threefry2x32_ops(*words), strict=True
        ):
            assert ours.shape == shape and ours.dtype == torch.int64
            torch.testing.assert_close(ours, expected, rtol=0, atol=0)
    built = tf._KERNELS.get(torch.device("cpu"))
    assert (built is not None) == (threefry_path == "kernel")


def test_threefry2x32_kernel_build_failure_falls_back_loudly(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import gpuvec_envs.compiler.flat as flat

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("no C++ compiler")

    monkeypatch.setattr(tf, "COMPILED_KERNEL", True)
    monkeypatch.setattr(tf, "_KERNELS", {})
    monkeypatch.setattr(flat, "compile_flat", broken)
    words = _threefry_words()
    with pytest.warns(RuntimeWarning, match=r"gpuvec::threefry2x32: .*no C\+\+ compiler"):
        ours = tf.threefry2x32(*words)
    assert tf._KERNELS == {torch.device("cpu"): None}
    for a, b in zip(ours, tf.threefry2x32_ops(*words), strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_threefry2x32_is_one_op_for_compilers() -> None:
    from torch.fx.experimental.proxy_tensor import make_fx

    from gpuvec_envs.compiler.flat import compile_flat

    keys = tf.prng_key(torch.arange(4))
    torch.library.opcheck(
        torch.ops.gpuvec.threefry2x32.default,
        (keys[:, 0:1], keys[:, 1:2], torch.zeros(3, dtype=torch.int64), torch.arange(3)),
    )
    graph = make_fx(lambda k: tf.split(k, 3), tracing_mode="fake")(keys)
    targets = [n.target for n in graph.graph.nodes if n.op == "call_function"]
    assert targets.count(torch.ops.gpuvec.threefry2x32.default) == 1
    assert not {torch.ops.aten.bitwise_xor.Tensor, torch.ops.aten.bitwise_xor.Scalar} & set(targets)
    compiled = compile_flat(lambda k: tf.split(k, 3), (keys,))
    torch.testing.assert_close(compiled(keys), tf.split(keys, 3), rtol=0, atol=0)


def test_prng_key_and_split_and_fold_in(threefry_path: str) -> None:
    ours, theirs = _keys(SEEDS + [-1, -5, 2**32 + 3])
    _eq(ours, theirs)
    for num in (2, 3, 5):
        _eq(tf.split(ours, num), jax.vmap(lambda k, n=num: jax.random.split(k, n))(theirs))
    a, b = tf.split2(ours)
    ja, jb = jax.vmap(jax.random.split)(theirs).transpose(1, 0, 2)
    _eq(a, ja)
    _eq(b, jb)
    for data in (0, 1, 17, 2**32 - 1):
        _eq(tf.fold_in(ours, data), jax.vmap(lambda k, d=data: jax.random.fold_in(k, d))(theirs))


@pytest.mark.parametrize(
    "shape",
    [(), (64, 64)]
    + [
        pytest.param((1,), marks=pytest.mark.heavy),
        pytest.param((3,), marks=pytest.mark.heavy),
        pytest.param((7, 5), marks=pytest.mark.heavy),
        pytest.param((2, 3, 4), marks=pytest.mark.heavy),
    ],
)
def test_random_bits_and_uniform(shape: tuple[int, ...], threefry_path: str) -> None:
    ours, theirs = _keys(SEEDS)
    _eq(tf.random_bits(ours, shape), jax.vmap(lambda k: jax.random.bits(k, shape))(theirs))
    _eq(tf.uniform(ours, shape), jax.vmap(lambda k: jax.random.uniform(k, shape))(theirs))
    _eq(
        tf.uniform(ours, shape, -2.5, 3.25),
        jax.vmap(lambda k: jax.random.uniform(k, shape, minval=-2.5, maxval=3.25))(theirs),
    )


@pytest.mark.parametrize(
    ("lo", "hi"),
    [(0, 4), (-3, 17)]
    + [
        pytest.param(*c, marks=pytest.mark.heavy)
        for c in [(0, 1), (0, 5), (0, 4096), (5, 5), (7, 3), (0, 100_003)]
    ],
)
def test_randint(lo: int, hi: int) -> None:
    ours, theirs = _keys(SEEDS)
    for shape in [(), (6,), (4, 9)]:
        _eq(
            tf.randint(ours, shape, lo, hi),
            jax.vmap(lambda k, s=shape: jax.random.randint(k, s, lo, hi))(theirs),
        )


def test_randint_large_span_wraps_like_uint32() -> None:
    ours, theirs = _keys(SEEDS)
    lo, hi = -(2**31), 2**31 - 1
    _eq(
        tf.randint(ours, (33,), lo, hi),
        jax.vmap(lambda k: jax.random.randint(k, (33,), lo, hi))(theirs),
    )


def test_choice_uniform_and_permutation() -> None:
    ours, theirs = _keys(SEEDS)
    dirs = np.array([[0, -1], [0, 1], [-1, 0], [1, 0]], dtype=np.int32)
    idx = tf.choice(ours, 4)
    expected = jax.vmap(lambda k: jax.random.choice(k, jnp.asarray(dirs)))(theirs)
    _eq(torch.from_numpy(dirs.astype(np.int64))[idx], expected)
    for n in (1, 2, 10, 300, 4096):
        _eq(tf.permutation(ours, n), jax.vmap(lambda k, n=n: jax.random.permutation(k, n))(theirs))


@pytest.mark.parametrize(
    "n",
    [2, 257, 4096]
    + [
        pytest.param(4, marks=pytest.mark.heavy),
        pytest.param(16, marks=pytest.mark.heavy),
        pytest.param(17, marks=pytest.mark.heavy),
        pytest.param(100, marks=pytest.mark.heavy),
        pytest.param(255, marks=pytest.mark.heavy),
        pytest.param(256, marks=pytest.mark.heavy),
    ],
)
def test_cumsum_in_xla_cpu_order(n: int) -> None:
    rng = np.random.default_rng(n)
    x = (rng.random((5, n)) * rng.choice([0.0, 1.0, 1e-3], (5, n))).astype(np.float32)
    _eq(tf.cumsum_xla_cpu(torch.from_numpy(x)), jax.jit(jax.vmap(jnp.cumsum))(x))


def test_choice_with_p_as_in_craftax() -> None:
    """Masks over a 64x64 map normalised by their count, the way craftax spawns and places."""
    rng = np.random.default_rng(1)
    seeds = list(range(40))
    ours, theirs = _keys(seeds)
    density = rng.random((len(seeds), 1))
    mask = (rng.random((len(seeds), 4096)) < density).astype(np.float32)
    mask[0] = 0
    mask[0, 4095] = 1
    mask[1] = 0
    mask[1, 0] = 1
    p = mask / mask.sum(1, keepdims=True)

    def ref(k, p):
        return jax.random.choice(k, jnp.arange(4096), p=p)

    expected = jax.jit(jax.vmap(ref))(theirs, p)
    _eq(tf.choice(ours, 4096, p=torch.from_numpy(p)), expected)
    _eq(tf.choice_in_mask(ours, torch.from_numpy(mask > 0)), expected)
    expected = jax.jit(jax.vmap(lambda k, p: jax.random.choice(k, 4096, (1,), p=p)))(theirs, p)
    _eq(tf.choice(ours, 4096, (1,), p=torch.from_numpy(p)), expected)
    # craftax's zombie chase: two choices, one or both with the largest distance
    q = np.array([[0.5, 0.5], [1.0, 0.0], [0.0, 1.0], [1 / 3, 1 / 3]] * 10, np.float32)
    expected = jax.vmap(lambda k, p: jax.random.choice(k, jnp.arange(2), p=p))(theirs, q)
    _eq(tf.choice(ours, 2, p=torch.from_numpy(q)), expected)


def test_choice_in_mask_equals_choice_with_p() -> None:
    """The counting form against the scan form (itself equal to jax's), incl. empty masks."""
    g = torch.Generator().manual_seed(5)
    n = 300
    keys = tf.prng_key(torch.arange(n))
    density = torch.rand(n, 1, generator=g) ** 3
    mask = torch.rand(n, 4096, generator=g) < density
    mask[:3] = False
    mask[3] = True
    mask[4, :4095] = False
    p = mask.to(torch.float32) / mask.sum(-1, keepdim=True).to(torch.float32)
    expected = tf.choice(keys, 4096, p=p)
    assert torch.equal(tf.choice_in_mask(keys, mask), expected)
    assert (expected[:3] == 4096).all()


def test_normal_close() -> None:
    ours, theirs = _keys(SEEDS)
    expected = torch.from_numpy(np.array(jax.vmap(lambda k: jax.random.normal(k, (50,)))(theirs)))
    torch.testing.assert_close(tf.normal(ours, (50,)), expected, rtol=2e-6, atol=2e-6)


@pytest.mark.heavy
def test_key_stream_many_seeds() -> None:
    """10,000 seeds: keys, splits and 64x64 uniforms bit for bit."""
    seeds = list(range(0, 10_000_000, 1000))
    ours, theirs = _keys(seeds)
    _eq(tf.split(ours, 2), jax.vmap(jax.random.split)(theirs))
    sub = tf.split2(ours)[1]
    jsub = jax.vmap(jax.random.split)(theirs)[:, 1]
    _eq(
        tf.uniform(sub, (64, 64)),
        jax.jit(jax.vmap(lambda k: jax.random.uniform(k, (64, 64))))(jsub),
    )


# --- glibc's sinf/cosf (what XLA:CPU calls) -------------------------------------------------


def _angles(stride: int) -> np.ndarray:
    """jax's ``2 * pi * uniform`` angles: ``6.2831855f * k * 2**-23``, every ``stride``-th k."""
    k = np.arange(0, 2**23, stride, dtype=np.uint32)
    u = (k | np.uint32(0x3F800000)).view(np.float32) - np.float32(1.0)
    return (np.float32(2 * np.pi) * u).astype(np.float32)


def _check_sincos(x: np.ndarray) -> None:
    from gpuvec_envs.envs.craftax._libm import sincosf

    sin, cos = sincosf(torch.from_numpy(x))
    _eq(sin, jax.jit(jnp.sin)(x))
    _eq(cos, jax.jit(jnp.cos)(x))


def test_sincosf_like_xla_cpu() -> None:
    light = (np.pi * ((np.arange(0, 10_001) / 300) % 1 + 0.3)).astype(np.float32)
    edges = np.float32([0.0, -0.0, 1e-30, 2.0**-12, 0.78539816, 0.7853982, -3.0, 119.9, -119.9])
    _check_sincos(
        np.concatenate([_angles(61), light, edges, np.linspace(-119, 119, 20001, dtype=np.float32)])
    )


@pytest.mark.heavy
def test_sincosf_every_perlin_angle() -> None:
    _check_sincos(_angles(1))


# --- world generation ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def craftax_generate():
    """craftax's ``generate_world`` under ``jit(vmap)`` for batches of 8 keys.

    Batches of at most 8: jax 0.10.2's XLA:CPU gives env ``i >= 8`` of a vmapped batch the
    Perlin noise of env ``i % 8`` (see ``test_reference_vmap_repeats_noise_every_8_envs``);
    up to 8 envs, each world is the one ``jit(generate_world)(key)`` builds from its key.
    """
    from craftax.craftax_classic.envs.craftax_state import EnvParams, StaticEnvParams
    from craftax.craftax_classic.world_gen import generate_world

    params, static = EnvParams(), StaticEnvParams()
    fn = jax.jit(jax.vmap(lambda k: generate_world(k, params, static)))

    def run(keys: np.ndarray):
        parts = [fn(keys[i : i + 8]) for i in range(0, len(keys), 8)]
        return jax.tree.map(lambda *x: np.concatenate([np.asarray(a) for a in x]), *parts)

    return run


def _check_worlds(craftax_generate, seeds: list[int], keys_from=None) -> None:
    from gpuvec_envs.envs.craftax.worldgen import generate_world

    ours, theirs = _keys(seeds)
    if keys_from is not None:
        ours, theirs = keys_from(ours), jax.vmap(lambda k: jax.random.split(k)[1])(theirs)
    cc.check_state(generate_world(ours), craftax_generate(np.asarray(theirs)))


def test_generate_world_equals_craftax(craftax_generate) -> None:
    _check_worlds(craftax_generate, [0, 1, 2, 3, 42, 1000, 2**31 + 5, 2**32 - 1])


def test_generate_world_from_split_keys(craftax_generate) -> None:
    """The way a training loop resets: ``rng, sub = split(PRNGKey(s))``; ``reset(sub)``."""
    _check_worlds(craftax_generate, list(range(100, 108)), keys_from=lambda k: tf.split2(k)[1])


@pytest.mark.heavy
def test_generate_world_equals_craftax_many_seeds(craftax_generate) -> None:
    """200 seeds; the unmarked tests cover 16."""
    _check_worlds(craftax_generate, list(range(200)))


@pytest.mark.heavy
def test_reference_vmap_repeats_noise_every_8_envs(craftax_generate) -> None:
    """Records a defect of the reference stack that the parity tests work around.

    Under ``jit(vmap(generate_world))`` (jax 0.10.2, XLA:CPU) env ``i >= 8`` of the batch gets
    the Perlin noise of env ``i % 8``: its terrain differs from what its own key builds
    (``jit(generate_world)(key)``, and our worlds). If this starts failing, jax fixed it and
    the 8-env batching in ``craftax_generate`` can go.
    """
    from craftax.craftax_classic.util.noise import generate_perlin_noise_2d

    keys = np.stack([np.asarray(jax.random.PRNGKey(s)) for s in range(12)])

    def f(k):
        return generate_perlin_noise_2d(k, (64, 64), (4, 4))

    batched = np.asarray(jax.jit(jax.vmap(f))(keys))
    single = np.stack([np.asarray(jax.jit(f)(k)) for k in keys])
    np.testing.assert_array_equal(batched[:8], single[:8])
    np.testing.assert_array_equal(batched[8:], single[:4])


# --- observation ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def craftax_symbolic():
    from craftax.craftax_classic.renderer import render_craftax_symbolic

    return cc.vmapped(render_craftax_symbolic)


def test_tenths_in_float16_like_jax() -> None:
    from gpuvec_envs.envs.craftax.obs import _tenths

    k = np.arange(-20, 200, dtype=np.int32)
    _eq(
        _tenths(torch.from_numpy(k).long()),
        (jnp.asarray(k).astype(jnp.float16) / 10.0).astype(jnp.float32),
    )


def test_symbolic_obs_at_reset(craftax_generate, craftax_symbolic) -> None:
    from gpuvec_envs.envs.craftax.obs import OBS_SIZE, symbolic_obs
    from gpuvec_envs.envs.craftax.worldgen import generate_world

    ours, theirs = _keys([0, 5, 77, 2**31 + 1])
    obs = symbolic_obs(generate_world(ours))
    assert obs.shape == (4, OBS_SIZE) == (4, 1345)
    _eq(obs, craftax_symbolic(jax.tree.map(jnp.asarray, craftax_generate(np.asarray(theirs)))))


@pytest.mark.parametrize("seed", [0, pytest.param(1, marks=pytest.mark.heavy)])
def test_symbolic_obs_of_varied_states(craftax_symbolic, seed: int) -> None:
    """Players on the border, mobs in, around and far from the view, active or not."""
    from gpuvec_envs.envs.craftax.obs import symbolic_obs

    state = cc.random_states(seed, 64)
    _eq(symbolic_obs(state), craftax_symbolic(cc.to_craftax(state)))


# --- player rules (state injection) ----------------------------------------------------------


def _with_mobs_in_front(state, seed: int):
    """A third of the envs get a zombie, cow or skeleton slot on the cell the player faces."""
    from gpuvec_envs.envs.craftax.rules import facing

    g = torch.Generator().manual_seed(seed)
    n = state.map.shape[0]
    target = facing(state)
    pick = torch.randint(0, 9, (n,), generator=g)
    fields = {}
    for k, group in enumerate(("zombies", "cows", "skeletons")):
        pos = getattr(state, f"{group}_position").clone()
        mask = getattr(state, f"{group}_mask").clone()
        rows = pick == k
        pos[rows, 0] = target[rows]
        mask[rows, 0] = torch.rand(int(rows.sum()), generator=g) < 0.8
        fields[f"{group}_position"] = pos
        fields[f"{group}_mask"] = mask
    return state._replace(**fields)


def _actions(seed: int, n: int) -> torch.Tensor:
    return torch.randint(0, 17, (n,), generator=torch.Generator().manual_seed(seed))


def _rule_cases(seed: int, n: int = 256):
    state = _with_mobs_in_front(cc.random_states(seed, n), seed)
    action = _actions(seed + 1, n)
    return state, action, cc.to_craftax(state), jnp.asarray(action.numpy().astype(np.int32))


@pytest.fixture(scope="module")
def craftax_rules():
    """craftax's game_logic functions, each under jit(vmap), by name."""
    from craftax.craftax_classic import game_logic as gl
    from craftax.craftax_classic.envs.craftax_state import EnvParams, StaticEnvParams

    params, static = EnvParams(), StaticEnvParams()
    fns = {
        "do_crafting": lambda s, a, k: gl.do_crafting(s, a),
        "do_action": lambda s, a, k: gl.do_action(k, s, a, static),
        "place_block": lambda s, a, k: gl.place_block(s, a, static),
        "move_player": lambda s, a, k: gl.move_player(s, a),
        "update_plants": lambda s, a, k: gl.update_plants(s, static),
        "update_player_intrinsics": lambda s, a, k: gl.update_player_intrinsics(s, a),
        "cap_inventory": lambda s, a, k: gl.cap_inventory(s),
        "update_health": lambda s, a, k: gl.update_health(s),
        "update_mobs": lambda s, a, k: gl.update_mobs(k, s, params, static),
        "spawn_mobs": lambda s, a, k: gl.spawn_mobs(s, k, params, static),
        "craftax_step": lambda s, a, k: gl.craftax_step(k, s, a, params, static),
    }
    return {name: cc.vmapped(fn) for name, fn in fns.items()}


RULES = [
    "do_crafting",
    "do_action",
    "place_block",
    "move_player",
    "update_plants",
    "update_player_intrinsics",
    "cap_inventory",
    "update_health",
    "update_mobs",
    "spawn_mobs",
    "craftax_step",
]


def _check_rule(craftax_rules, name: str, seed: int, n: int = 256, action=None) -> None:
    from gpuvec_envs.envs.craftax import mobs, rules, step
    from gpuvec_envs.envs.craftax.state import CraftaxParams

    state, act, ref_state, ref_act = _rule_cases(seed, n)
    if action is not None:
        act = torch.full_like(act, int(action))
        ref_act = jnp.asarray(act.numpy().astype(np.int32))
    keys = tf.prng_key(torch.arange(n) + 1000 * seed)
    ref_keys = jnp.asarray(keys.numpy().astype(np.uint32))
    params = CraftaxParams()
    fn = getattr(rules, name, None)
    reward = None
    if name == "do_action":
        ours = fn(keys, state, act)
    elif name in ("update_plants", "cap_inventory", "update_health"):
        ours = fn(state)
    elif name == "update_mobs":
        ours = mobs.update_mobs(keys, state, params)
    elif name == "spawn_mobs":
        ours = mobs.spawn_mobs(state, keys, params)
    elif name == "craftax_step":
        ours, reward = step.craftax_step(keys, state, act, params)
    else:
        ours = fn(state, act)
    ref = craftax_rules[name](ref_state, ref_act, ref_keys)
    if reward is not None:
        ref, ref_reward = ref
        _eq(reward, ref_reward)
    cc.check_state(ours, ref)


@pytest.mark.parametrize(
    "name",
    [n if n == "craftax_step" else pytest.param(n, marks=pytest.mark.heavy) for n in RULES],
)
def test_rule_equals_craftax(craftax_rules, name: str) -> None:
    _check_rule(craftax_rules, name, seed=3)


@pytest.mark.parametrize(
    ("name", "action"),
    [
        ("do_action", 5),
        ("place_block", 7),
        ("place_block", 8),
        ("place_block", 9),
        ("place_block", 10),
        ("move_player", 1),
        ("move_player", 3),
        ("update_player_intrinsics", 6),
    ]
    + [("do_crafting", a) for a in range(11, 17)],
)
@pytest.mark.heavy
def test_player_rule_for_one_action(craftax_rules, name: str, action: int) -> None:
    """Every env doing the action the rule is about."""
    _check_rule(craftax_rules, name, seed=4, action=action)


# --- whole trajectories ----------------------------------------------------------------------


def _policy_actions(seed: int, steps: int, n: int) -> torch.Tensor:
    """``(steps, n)`` actions: a third uniform, the rest a scripted mix (walk runs, DO bursts,
    placing and crafting, sleeping), so trees are cut, tables placed and tools made."""
    g = torch.Generator().manual_seed(seed)
    uniform = torch.randint(0, 17, (steps, n), generator=g)
    walk = torch.randint(1, 5, (steps // 8 + 1, n), generator=g).repeat_interleave(8, 0)[:steps]
    kind = torch.randint(0, 10, (steps, n), generator=g)
    scripted = torch.where(kind < 4, walk, 5)
    scripted = torch.where(kind == 8, torch.randint(7, 17, (steps, n), generator=g), scripted)
    scripted = torch.where(kind == 9, torch.randint(6, 7, (steps, n), generator=g), scripted)
    third = torch.arange(n) % 3 == 0
    return torch.where(third, uniform, scripted)


def _run_trajectory(craftax_rules, seeds: list[int], steps: int) -> dict[str, float]:
    """Step ours and craftax's ``craftax_step`` from the same worlds and keys; compare all.

    Returns counts of what happened (to show the trajectories exercise the rules).
    """
    from gpuvec_envs.envs.craftax.state import CraftaxParams
    from gpuvec_envs.envs.craftax.step import craftax_step, is_game_over
    from gpuvec_envs.envs.craftax.worldgen import generate_world

    params = CraftaxParams()
    keys = tf.prng_key(torch.tensor(seeds))
    keys, sub = tf.split2(keys)
    ours = generate_world(sub)
    ref = cc.to_craftax(ours)
    actions = _policy_actions(seeds[0], steps, len(seeds))
    stats = {"reward": 0.0, "done": 0, "achievements": 0}
    for t in range(steps):
        keys, sub = tf.split2(keys)
        act = actions[t]
        ours, reward = craftax_step(sub, ours, act, params)
        ref, ref_reward = craftax_rules["craftax_step"](
            ref,
            jnp.asarray(act.numpy().astype(np.int32)),
            jnp.asarray(sub.numpy().astype(np.uint32)),
        )
        _eq(reward, ref_reward)
        cc.check_state(ours, ref)
        stats["reward"] += float(reward.sum())
        stats["done"] += int(is_game_over(ours, params).sum())
    stats["achievements"] = int(ours.achievements.sum())
    return stats


@pytest.mark.heavy
def test_trajectory_equals_craftax(craftax_rules) -> None:
    """8 worlds, 40 steps, state and reward equal at every step."""
    stats = _run_trajectory(craftax_rules, list(range(8)), 40)
    assert stats["achievements"] > 0


@pytest.mark.heavy
def test_long_trajectories_equal_craftax(craftax_rules) -> None:
    """16 worlds x 1000 steps, random and scripted actions, equal at every step."""
    stats = _run_trajectory(craftax_rules, list(range(300, 316)), 1000)
    assert stats["achievements"] >= 16
