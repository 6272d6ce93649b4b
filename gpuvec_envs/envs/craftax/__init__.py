"""Craftax-Classic (craftax 1.6.1) as batched torch: the foundation, not yet an env.

Done and tested bit for bit against craftax on jax 0.10.2 (CPU): jax's threefry key stream
and samplers (:mod:`._threefry`), glibc's ``sinf``/``cosf`` as XLA:CPU calls them
(:mod:`._libm`), and world generation (:mod:`.worldgen`) into the batched
:class:`~.state.CraftaxState`. The step rules, observations and the registered
``gpuvec/Craftax-Classic-*`` IDs are not written yet.
"""
