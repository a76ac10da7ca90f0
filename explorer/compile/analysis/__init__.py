"""Why torch.compile recompiled and with what period, from compile records."""

__all__: list[str] = []
