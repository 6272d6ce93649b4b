"""Write Craftax-Classic's textures as uint8 arrays, ``gpuvec_envs/envs/craftax/assets/``.

Usage: ``python tools/craftax_textures.py`` (needs craftax 1.6.1 and jax). The arrays are
taken from craftax's own loader, ``load_all_textures_given_size`` in
``craftax/craftax_classic/constants.py`` (PNG reads, PIL nearest-neighbour resizing, alpha
clamping), at the agent's block size (7 px) and the human one (64 px), so that
:mod:`gpuvec_envs.envs.craftax.pixels` draws with them without jax, craftax or PIL. Per size
``s`` (``sm = int(0.8 s)`` inventory icons, ``ns = int(0.6 s)`` digits), keys ``"{s}/name"``:

- ``block`` (17, s, s, 3): the block textures (``OUT_OF_BOUNDS`` is craftax's flat 128 grey);
- ``player`` (5, s, s, 4): RGBA, facing left/right/up/down and sleeping, alpha 0-255;
- ``mobs`` (3, s, s, 4): zombie, cow, skeleton, RGBA, alpha 0-255;
- ``arrow`` (s, s, 4): the up-arrow's colour (alpha applied) and alpha 0/1;
- ``icons`` (16, sm, sm, 3): the inventory icons in :data:`pixels.INVENTORY_SLOTS` order;
- ``digits`` (10, ns, ns, 4): digit colour (alpha applied) and alpha 0/1 (0: empty).

Craftax is MIT-licensed (``assets/CRAFTAX_LICENSE``, copied next to the arrays). The night
noise mask is not stored: the renderer computes it with craftax's numpy code.
"""

from __future__ import annotations

import pathlib
import shutil

import numpy as np
from craftax.craftax_classic import constants as C

OUT = pathlib.Path(__file__).resolve().parents[1] / "gpuvec_envs/envs/craftax/assets"
SIZES = (C.BLOCK_PIXEL_SIZE_AGENT, C.BLOCK_PIXEL_SIZE_HUMAN)
B = C.BlockType
ICONS = (
    "health_texture",
    "hunger_texture",
    "thirst_texture",
    "energy_texture",
    "sapling_texture",
    B.WOOD,
    B.STONE,
    B.COAL,
    B.IRON,
    B.DIAMOND,
    "wood_pickaxe_texture",
    "stone_pickaxe_texture",
    "iron_pickaxe_texture",
    "wood_sword_texture",
    "stone_sword_texture",
    "iron_sword_texture",
)


def u8(a) -> np.ndarray:
    """An integer array in [0, 255] as uint8 (checked)."""
    a = np.asarray(a)
    assert a.dtype.kind in "iu" and a.min() >= 0 and a.max() <= 255, (a.dtype, a.min(), a.max())
    return a.astype(np.uint8)


def rgba(rgb, alpha_float) -> np.ndarray:
    """RGB and craftax's float32 alpha (raw / 255) as RGBA uint8, checked to round-trip."""
    raw = np.rint(np.asarray(alpha_float, np.float64)[..., 0] * 255).astype(np.uint8)
    assert np.array_equal(raw.astype(np.float32) / np.float32(255), np.asarray(alpha_float)[..., 0])
    return np.concatenate((u8(rgb), raw[..., None]), -1)


def size_arrays(s: int) -> dict[str, np.ndarray]:
    """The arrays of block size ``s`` from craftax's loader."""
    t = C.load_all_textures_given_size(s)
    pr, pc = (C.OBS_DIM[0] // 2) * s, (C.OBS_DIM[1] // 2) * s
    player = [
        rgba(
            t["full_map_player_textures"][i][pr : pr + s, pc : pc + s],
            t["full_map_player_textures_alpha"][i][pr : pr + s, pc : pc + s],
        )
        for i in range(5)
    ]
    assert all(np.array_equal(p, u8(q)) for p, q in zip(player, t["player_textures"], strict=True))
    mobs = [rgba(t[f"{m}_texture"], t[f"{m}_texture_alpha"]) for m in ("zombie", "cow", "skeleton")]
    icons = [t["smaller_block_textures"][k.value] if isinstance(k, B) else t[k] for k in ICONS]
    digits = np.concatenate((u8(t["number_textures"]), u8(t["number_textures_alpha"][..., :1])), -1)
    return {
        "block": u8(t["block_textures"]),
        "player": np.stack(player),
        "mobs": np.stack(mobs),
        "arrow": np.concatenate(
            (u8(t["arrow_texture"]), u8(t["arrow_texture_alpha"][..., :1])), -1
        ),
        "icons": np.stack([u8(i) for i in icons]),
        "digits": digits,
    }


def main() -> None:
    """Write the arrays and craftax's license notice."""
    arrays = {f"{s}/{k}": v for s in SIZES for k, v in size_arrays(s).items()}
    OUT.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(OUT / "textures.npz", **arrays)
    dist = pathlib.Path(C.__file__).parents[2] / "craftax-1.6.1.dist-info/licenses/LICENSE"
    shutil.copyfile(dist, OUT / "CRAFTAX_LICENSE")
    for k, v in arrays.items():
        print(k, v.shape)
    print((OUT / "textures.npz").stat().st_size, "bytes")


if __name__ == "__main__":
    main()
