"""One module per CLI command; each exposes ``register(subparsers)``."""

__all__: list[str] = []
