"""Craftax-Classic (craftax 1.6.1) as batched torch: the game, not yet a registered env.

Bit for bit as craftax computes it on jax 0.10.2 (CPU), tested field by field: jax's
threefry key stream and samplers (:mod:`._threefry`), glibc's ``sinf``/``cosf`` as XLA:CPU
calls them and its fused multiply-adds (:mod:`._libm`), world generation
(:mod:`.worldgen`), the symbolic observation (:mod:`.obs`), the player rules
(:mod:`.rules`), mobs (:mod:`.mobs`) and the whole step (:mod:`.step`), on the batched
:class:`~.state.CraftaxState`. Not yet: the pixel observation and renderer, the
:class:`~gpuvec_envs.core.env.EnvDef` wrapper with seeds, autoreset and ``info``, the
registered ``gpuvec/Craftax-Classic-*`` IDs, and a compiled (fast) step.
"""
