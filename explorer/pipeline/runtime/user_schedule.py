"""``--from MODULE:CLASS``: read a user's schedule class in a child process.

The parent (``schedule``, ``check``, ``fix`` or ``run`` with ``--from``) starts ``python -m explorer.pipeline.runtime.user_schedule`` with the class, the
sizes and its own ``sys.path``; the child imports the class, runs it for every stage through
:func:`explorer.pipeline.schedules.adapters.from_deepspeed` and writes the schedule's JSON form to its
stdout. Whatever the class does - raise, ``sys.exit``, segfault, loop forever, print - the
parent gets either the schedule or one sentence naming what went wrong (exit 2).
"""

from __future__ import annotations

import json
import os
import sys

from explorer.errors import InputError, excerpt, one_line
from explorer.gcpause import frozen_imports
from explorer.pipeline.schedules import io
from explorer.pipeline.schedules.schedule import Schedule
from explorer.processes.isolate import raised, refuse, run_child


def schedule_from_class(spec: str, stages: int, microbatches: int, timeout_s: float) -> Schedule:
    """The schedule a DeepSpeed-style class yields, read in a child within ``timeout_s`` seconds."""
    argv = [
        sys.executable,
        "-m",
        "explorer.pipeline.runtime.user_schedule",
        spec,
        str(stages),
        str(microbatches),
        json.dumps(sys.path),
    ]
    outcome = run_child(argv, timeout_s)
    if outcome.returncode == 0 and not outcome.timed_out:
        try:
            return io.from_json(json.loads(outcome.stdout))
        except (ValueError, InputError) as exc:  # pragma: no cover - the child writes what io reads
            raise InputError(
                f"--from {excerpt(spec)}: its schedule could not be read back ({one_line(str(exc), 200)})"
            ) from None
    message = outcome.input_error
    if message:
        raise InputError(message)
    raise InputError(outcome.ending(f"--from {excerpt(spec)}", timeout_s))


def main(argv: list[str]) -> int:
    """Child side: import, build, print JSON; an input error goes to stderr after :data:`MARKER`."""
    spec, stages, microbatches, path = argv
    sys.path[:] = json.loads(path)
    result = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # the user's prints go to stderr, never into the JSON
    try:
        from explorer.pipeline.schedules.adapters import from_deepspeed, load_class

        with frozen_imports():  # a DeepSpeed class imports torch and DeepSpeed (gcpause)
            cls = load_class(spec)
        doc = io.to_json(from_deepspeed(cls, int(stages), int(microbatches)))
    except InputError as exc:
        return refuse(str(exc))
    except (KeyboardInterrupt, SystemExit, Exception) as exc:
        return refuse(
            f"--from {excerpt(spec)}: the class raised {raised(exc)} while its steps were read; fix the class"
        )
    result.write(json.dumps(doc))
    result.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

__all__ = ["schedule_from_class", "main"]
