"""The pipeline product: schedules, their hazards, mismatches and deadlocks, and real runs.

The names a notebook or a user script needs, each loaded on first use (``import
explorer.pipeline`` imports nothing heavy)::

    from explorer.pipeline import build, check, grid_figure, ScheduleExplorer
    report = check(build("deepspeed-train", 4, 8, buffers="fixed"))
"""

from explorer.lazy import exports

_ANALYSIS = "explorer.pipeline.analysis"
_VIEWS = "explorer.pipeline.views"
_RUNTIME = "explorer.pipeline.runtime"
_TABLE = {
    # schedules, checked
    "build": _ANALYSIS,
    "KINDS": "explorer.pipeline.schedules.generators",  # every kind build takes, with its words
    "check": _ANALYSIS,
    "Costs": _ANALYSIS,
    "Report": _ANALYSIS,
    "check_sizes": f"{_ANALYSIS}.sizes",
    "parse_sizes": f"{_ANALYSIS}.sizes",
    "SizeAsking": (f"{_ANALYSIS}.sizes", "Asking"),
    "search_fixes": f"{_ANALYSIS}.repair",
    "RULES": f"{_ANALYSIS}.rules",
    "apply_rules": f"{_ANALYSIS}.rules",
    "measured_costs": f"{_ANALYSIS}.recost",
    "measured_bubble": f"{_ANALYSIS}.measured",
    "measured_vs_simulated": f"{_ANALYSIS}.measured",
    "makespan": f"{_ANALYSIS}.measured",
    # text
    "listing": "explorer.pipeline.printout.listing",
    "summary": "explorer.pipeline.printout.listing",
    # what a run measured
    "MeasuredTrace": "explorer.pipeline.traces",
    # figures
    "grid_figure": f"{_VIEWS}.grid",
    "timeline_figure": f"{_VIEWS}.timeline",
    "comparison_figure": f"{_VIEWS}.compare",
    "lifetimes_figure": f"{_VIEWS}.lifetimes",
    "sizes_figure": f"{_VIEWS}.sizes",
    "overlay_figure": f"{_VIEWS}.overlay",
    "pinned_grid": f"{_VIEWS}.live",
    "findings_by_cell": f"{_VIEWS}.marks",
    # real runs
    "RunSpec": _RUNTIME,
    "run_pipeline": _RUNTIME,
    "compare_engines": _RUNTIME,
    "PipelineRunner": _RUNTIME,
    "Follower": _RUNTIME,
    "run_deepspeed_engine": f"{_RUNTIME}.deepspeed.engine",
    # widgets
    "ScheduleExplorer": "explorer.pipeline.app.schedule_explorer",
    "JobFollower": "explorer.pipeline.app.job_follower",
}
__getattr__, __dir__ = exports(__name__, _TABLE)
__all__ = sorted(_TABLE)
