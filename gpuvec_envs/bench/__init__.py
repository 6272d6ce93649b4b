"""Benchmarks: env-steps/s side by side with the peers, and the generated report.

``gpuvec-bench`` / ``python -m gpuvec_envs.bench`` is :mod:`~gpuvec_envs.bench.cli`.
:mod:`~gpuvec_envs.bench.measure` holds what every benchmark shares (interleaved timing,
openers, tables); :mod:`~gpuvec_envs.bench.suites` the named sweeps; ``peer_gymnax`` and
``peer_navix`` the JAX peers; :mod:`~gpuvec_envs.bench.report` renders BENCHMARKS.md;
``rollout``, ``startup`` and ``soak`` are single-purpose benchmarks run as modules.
"""
