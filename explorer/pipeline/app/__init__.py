"""The pipeline product's widgets (ScheduleExplorer, JobFollower, the sizes panel), built from its views' figures."""

__all__: list[str] = []
