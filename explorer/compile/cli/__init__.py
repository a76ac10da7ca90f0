"""The compile product's commands: ``explorer compile-probe`` and its ``explorer read`` reader."""

__all__: list[str] = []
