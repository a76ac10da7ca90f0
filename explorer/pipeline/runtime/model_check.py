"""Build a user's ``--model MODULE:FUNCTION`` once in a child process before any rank starts.

The launcher checks the model before starting N ranks, so a bad one is one message instead of
N dead ranks. A user's function is arbitrary code: run in the launcher's own process, a
``sys.exit``, a segfault or an endless loop in it would end or hang the CLI (or the notebook
kernel). So it is built here, in a child with a timeout; the parent gets nothing back on success,
and one :class:`InputError` naming the ending otherwise.
"""

from __future__ import annotations

import json
import sys

from explorer.errors import InputError
from explorer.processes.isolate import raised, refuse, run_child

#: Seconds the child may take: importing torch and the user's module, then building the model.
TIMEOUT_S = 300.0


def check_user_model(
    model: dict, stages: int, microbatch_size: int, seed: int, timeout_s: float = TIMEOUT_S
) -> None:
    """Build ``model`` (a ModelSpec's JSON form) for ``stages`` stages in a child; raise InputError if it fails."""
    doc = {
        "model": model,
        "stages": stages,
        "microbatch_size": microbatch_size,
        "seed": seed,
        "path": sys.path,
    }
    outcome = run_child(
        [sys.executable, "-m", "explorer.pipeline.runtime.model_check", json.dumps(doc)], timeout_s
    )
    if outcome.returncode == 0 and not outcome.timed_out:
        return
    raise InputError(
        outcome.input_error or outcome.ending(f"--model {model.get('name')}", timeout_s)
    )


def main(argv: list[str]) -> int:
    """Child side: build the model; an input error goes to stderr after :data:`MARKER`."""
    doc = json.loads(argv[0])
    sys.path[:] = doc["path"]
    try:
        from explorer.pipeline.runtime.models import build_model
        from explorer.pipeline.runtime.spec import ModelSpec

        model = dict(doc["model"])
        if model.get("cuts") is not None:
            model["cuts"] = tuple(model["cuts"])
        build_model(ModelSpec(**model), doc["stages"], doc["microbatch_size"], doc["seed"])
    except InputError as exc:
        return refuse(str(exc))
    except (KeyboardInterrupt, SystemExit, Exception) as exc:
        return refuse(
            f"--model {doc['model'].get('name')} raised {raised(exc)} while it was built; fix the function"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

__all__ = ["TIMEOUT_S", "check_user_model", "main"]
