"""MinAtar: Asterix, Breakout, Freeway, Seaquest, SpaceInvaders (the ``minatar`` package).

``_common`` holds what the five games share (params, sticky actions, action sets, spaces).
"""
