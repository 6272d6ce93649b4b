"""MiniGrid: Empty, DoorKey, FourRooms, Unlock, KeyCorridor, lava worlds, Dynamic-Obstacles.

``_grid`` holds what the family shares (cell encoding, actions, the agent's view, placement).
"""
