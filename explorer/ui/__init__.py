"""What every product's app shares: the plot view, widget sync, the callback guard and static pages."""

__all__: list[str] = []
