"""The explorer's "Run" control: ``ScheduleExplorer(runner=PipelineRunner())``.

``ScheduleExplorer`` calls ``runner(schedule, costs) -> MeasuredTrace`` (its documented seam).
This runner launches the real pipeline for that schedule and returns the last iteration's
measured instructions, which the explorer overlays on the simulated timeline.

Two things the seam alone does not carry are done through :meth:`PipelineRunner.attach`
(duck-typed, so the runtime never imports ipywidgets and writes neither markup nor words):
while the run goes, each rank's progress goes to the explorer's ``show_progress`` as typed
records (:class:`~explorer.pipeline.traces.follow.RankProgress`), the finished run to
``show_result`` as its :class:`PipelineRunResult`; the explorer turns them into words. A failed run
first overlays its partial trace, then raises :class:`RunFailed` carrying the result, whose
:class:`~explorer.failure.Failure` (rank, stage, step, instruction, why) the explorer
shows as the reason.
"""

from __future__ import annotations

from typing import Any, Optional

from explorer.pipeline.analysis import Costs
from explorer.pipeline.runtime.launch import run_pipeline
from explorer.pipeline.runtime.spec import ModelSpec, RunSpec
from explorer.pipeline.schedules.schedule import Schedule
from explorer.pipeline.traces.follow import Follower
from explorer.pipeline.traces.records import MeasuredTrace
from explorer.pipeline.traces.result import PipelineRunResult


class RunFailed(RuntimeError):
    """The real run failed; ``result`` keeps everything it measured."""

    def __init__(self, result: PipelineRunResult) -> None:
        f = result.failure
        where = f.where() if f is not None else ""
        message = f.message if f is not None else "the run failed"
        super().__init__(f"{where}: {message}" if where else message)
        self.result = result


class PipelineRunner:
    """Launches the real pipeline for the explorer (see the module docstring)."""

    def __init__(
        self,
        model: str = "mlp",
        *,
        iterations: int = 2,
        stall_timeout_s: float = 20.0,
        **options: Any,
    ) -> None:
        self.model, self.iterations, self.stall_timeout_s, self.options = (
            model,
            iterations,
            stall_timeout_s,
            options,
        )
        self.last: Optional[PipelineRunResult] = None
        self.app: Any = None

    def attach(self, app: Any) -> Any:
        """Report progress via ``app.show_progress``/``show_result`` and overlay partial traces via ``app.show_trace``."""
        self.app = app
        return app

    def __call__(self, schedule: Schedule, costs: Costs = Costs()) -> MeasuredTrace:
        spec = RunSpec.for_schedule(
            schedule,
            model=ModelSpec(self.model),
            iterations=self.iterations,
            stall_timeout_s=self.stall_timeout_s,
            **self.options,
        )
        self.last = result = run_pipeline(spec, progress=self._progress)
        if result.failure is not None:
            if self.app is not None and result.records:
                self.app.show_trace(result.trace(iteration=-1))
            raise RunFailed(result)
        if self.app is not None:
            self.app.show_result(result)
        return result.trace()

    def _progress(self, follower: Follower) -> None:
        if self.app is not None:
            # each rank's state by the one definition every view uses (stopped, not running,
            # once a neighbour failed or the run ended)
            self.app.show_progress(follower.progress())


__all__ = ["RunFailed", "PipelineRunner"]
