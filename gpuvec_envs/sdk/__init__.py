"""Envs of your own: check an :class:`EnvDef` against the contract, then register it.

:func:`~gpuvec_envs.sdk.check.check_env_def` tests it and
:func:`~gpuvec_envs.sdk.custom.register` registers it with gymnasium; both are also
``gpuvec_envs.check_env_def`` and ``gpuvec_envs.register``. See docs/custom-envs.md.
"""
