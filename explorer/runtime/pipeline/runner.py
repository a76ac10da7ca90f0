"""The explorer's "Run" control: ``ScheduleExplorer(runner=PipelineRunner())``.

``ScheduleExplorer`` calls ``runner(schedule, costs) -> MeasuredTrace`` (its documented seam).
This runner launches the real pipeline for that schedule and returns the last iteration's
measured instructions, which the explorer overlays on the simulated timeline.

Two things the seam alone does not carry are done through :meth:`PipelineRunner.attach`
(duck-typed, so the runtime never imports ipywidgets and writes no markup): progress per rank
goes to the explorer's ``report_progress`` (plain lines) while the run goes, and a failed run first overlays its partial trace,
then raises :class:`RunFailed` whose message (rank, stage, step, instruction, why) the explorer
shows as the reason.
"""

from __future__ import annotations

from typing import Any, Optional

from explorer.analysis import Costs
from explorer.runtime.pipeline.launch import run_pipeline
from explorer.runtime.pipeline.spec import ModelSpec, RunSpec
from explorer.schedules.schedule import Schedule
from explorer.traces.pipeline.follow import Follower
from explorer.traces.pipeline.result import RunResult
from explorer.traces.records import MeasuredTrace


class RunFailed(RuntimeError):
    """The real run failed; ``result`` keeps everything it measured."""

    def __init__(self, result: RunResult) -> None:
        f = result.failure or {}
        where = (
            f"rank {f.get('rank')}, stage {f.get('stage')}, step {f.get('step')}, {f.get('instruction')}: "
            if f.get("rank") is not None
            else ""
        )
        super().__init__(f"{where}{f.get('message', 'the run failed')}")
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
        self.last: Optional[RunResult] = None
        self.app: Any = None

    def attach(self, app: Any) -> Any:
        """Report progress via ``app.report_progress``/``report_run`` and overlay partial traces via ``app.show_trace``."""
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
                self.app.show_trace(result.trace(iteration=-1 if result.failure else None))
            raise RunFailed(result)
        if self.app is not None:
            verdict = "bitwise equal to" if result.bitwise_equal_to_reference else "DIFFERENT FROM"
            self.app.report_run(
                f"ran {schedule.name} on {schedule.num_ranks} processes: losses and gradients "
                f"{verdict} the reference (run folder {result.folder.name})"
            )
        return result.trace()

    def _progress(self, follower: Follower) -> None:
        if self.app is None:
            return
        rows = [
            f"rank {r}: {p.state}, iteration {max(p.iteration, 0)}, step {p.last_step}"
            for r, p in sorted(follower.ranks.items())
        ]
        self.app.report_progress(["running the real pipeline…", *rows])
