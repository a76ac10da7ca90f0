"""What a pipeline run left behind: rank records, the run's result, its Chrome trace and measured costs."""

__all__: list[str] = []
