"""MuJoCo: gymnasium's eleven v5 tasks (Ant, HalfCheetah, Hopper, Humanoid, ...).

Each task module mirrors its gymnasium ``*_v5.py`` (reward terms as named functions, the
same ``info`` keys and keyword arguments); ``_base`` holds what the family shares and
``bridge`` is the one module that calls MuJoCo (the C engine on the CPU, MuJoCo Warp on
CUDA). Needs the optional dependency: ``pip install "gpuvec_envs[mujoco]"``.
"""
