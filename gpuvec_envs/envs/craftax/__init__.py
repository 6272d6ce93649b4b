"""Craftax-Classic (craftax 1.6.1) as batched torch: ``gpuvec/Craftax-Classic-Symbolic-v1``.

Bit for bit as craftax computes it on jax 0.10.2 (CPU), tested field by field: jax's
threefry key stream and samplers (:mod:`._threefry`), glibc's ``sinf``/``cosf`` as XLA:CPU
calls them and its fused multiply-adds (:mod:`._libm`), world generation
(:mod:`.worldgen`), the symbolic observation (:mod:`.obs`), the player rules
(:mod:`.rules`), mobs (:mod:`.mobs`) and the whole step (:mod:`.step`), on the batched
:class:`~.state.CraftaxState`; the registered env, its seeds-to-keys map and the score
helpers are in :mod:`.classic` (docs/craftax.md). Not implemented: the pixel observation
and ``rgb_array`` rendering.
"""
