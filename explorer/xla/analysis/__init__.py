"""Why an XLA step compiled a new graph, from the run's records."""

__all__: list[str] = []
