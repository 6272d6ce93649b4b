"""Classic control: CartPole, Pendulum, MountainCar(Continuous), Acrobot (gymnasium).

Each mirrors its gymnasium reference step for step; ``_draw`` and ``_util`` are shared
by this family only.
"""
