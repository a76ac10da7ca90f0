"""The XLA product's commands: ``explorer xla-run``, ``hlo-diff``, ``hlo-list`` and its ``explorer read`` reader."""

__all__: list[str] = []
