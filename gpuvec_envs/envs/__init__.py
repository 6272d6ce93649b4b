"""The environments, a folder per family: ``classic``, ``minatar``, ``minigrid``.

One module per env: a frozen params dataclass, a state NamedTuple, pure batched functions.
"""
