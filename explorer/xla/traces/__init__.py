"""Records of an XLA run: per-step records, the child's message protocol, its debug log and how it failed."""

__all__: list[str] = []
