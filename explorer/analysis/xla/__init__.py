"""Why an XLA step compiled a new graph, from the run's records."""
