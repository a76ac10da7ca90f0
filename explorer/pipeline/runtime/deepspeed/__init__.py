"""DeepSpeed's own ``PipelineEngine`` in the loop: run a schedule on it, or trace a user's job.

- :mod:`.guard`: the engine internals this package relies on, checked against the installed
  release (one line naming the version and what is missing).
- :mod:`.schedules`: an explorer schedule replayed as a ``PipeSchedule``, and a schedule class
  from another DeepSpeed release mapped onto today's instruction classes.
- :mod:`.instrument`: ``explorer.instrument(engine, out_dir)``, the live per-rank trace.
- :mod:`.worker`: one rank of ``explorer run --engine deepspeed``.
- :mod:`.engine`: the launcher side (the same spawn and watch as the explorer's engine).

Importing this package imports neither torch nor deepspeed.
"""

__all__: list[str] = []
