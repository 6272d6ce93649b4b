"""Craftax-Classic's enums and tables, as in ``craftax/craftax_classic/constants.py`` (1.6.1).

Plain Python (no torch, no jax): block types, actions, achievements, the observation window
and the movement directions, in craftax's numbering, which the observation encodes.
"""

from __future__ import annotations

from enum import IntEnum

#: Rows and columns of the local view around the player (craftax's ``OBS_DIM``).
OBS_DIM = (7, 9)


class BlockType(IntEnum):
    """Map cell types (``BlockType``)."""

    INVALID = 0
    OUT_OF_BOUNDS = 1
    GRASS = 2
    WATER = 3
    STONE = 4
    TREE = 5
    WOOD = 6
    PATH = 7
    COAL = 8
    IRON = 9
    DIAMOND = 10
    CRAFTING_TABLE = 11
    FURNACE = 12
    SAND = 13
    LAVA = 14
    PLANT = 15
    RIPE_PLANT = 16


class Action(IntEnum):
    """The 17 actions (``Action``); 1-4 move (or turn) left, right, up, down."""

    NOOP = 0
    LEFT = 1
    RIGHT = 2
    UP = 3
    DOWN = 4
    DO = 5
    SLEEP = 6
    PLACE_STONE = 7
    PLACE_TABLE = 8
    PLACE_FURNACE = 9
    PLACE_PLANT = 10
    MAKE_WOOD_PICKAXE = 11
    MAKE_STONE_PICKAXE = 12
    MAKE_IRON_PICKAXE = 13
    MAKE_WOOD_SWORD = 14
    MAKE_STONE_SWORD = 15
    MAKE_IRON_SWORD = 16


class Achievement(IntEnum):
    """The 22 achievements (``Achievement``), in the order of ``state.achievements``."""

    COLLECT_WOOD = 0
    PLACE_TABLE = 1
    EAT_COW = 2
    COLLECT_SAPLING = 3
    COLLECT_DRINK = 4
    MAKE_WOOD_PICKAXE = 5
    MAKE_WOOD_SWORD = 6
    PLACE_PLANT = 7
    DEFEAT_ZOMBIE = 8
    COLLECT_STONE = 9
    PLACE_STONE = 10
    EAT_PLANT = 11
    DEFEAT_SKELETON = 12
    MAKE_STONE_PICKAXE = 13
    MAKE_STONE_SWORD = 14
    WAKE_UP = 15
    PLACE_FURNACE = 16
    COLLECT_COAL = 17
    COLLECT_IRON = 18
    COLLECT_DIAMOND = 19
    MAKE_IRON_PICKAXE = 20
    MAKE_IRON_SWORD = 21


#: Inventory items in craftax's ``Inventory`` field order (the columns of ``state.inventory``).
INVENTORY = (
    "wood",
    "stone",
    "coal",
    "iron",
    "diamond",
    "sapling",
    "wood_pickaxe",
    "stone_pickaxe",
    "iron_pickaxe",
    "wood_sword",
    "stone_sword",
    "iron_sword",
)

#: ``DIRECTIONS[action]``: the (row, col) step of actions 0-4; zero for the other actions.
DIRECTIONS = ((0, 0), (0, -1), (0, 1), (-1, 0), (1, 0)) + ((0, 0),) * 11

#: Blocks the player and mobs cannot enter (``SOLID_BLOCKS``).
SOLID_BLOCKS = (
    BlockType.WATER,
    BlockType.STONE,
    BlockType.TREE,
    BlockType.COAL,
    BlockType.IRON,
    BlockType.DIAMOND,
    BlockType.CRAFTING_TABLE,
    BlockType.FURNACE,
    BlockType.PLANT,
    BlockType.RIPE_PLANT,
)
