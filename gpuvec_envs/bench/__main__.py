"""``python -m gpuvec_envs.bench``: the ``gpuvec-bench`` command."""

from gpuvec_envs.bench.cli import main

raise SystemExit(main())
