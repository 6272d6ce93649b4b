"""One module per environment: params dataclass, state NamedTuple, pure batched functions."""
