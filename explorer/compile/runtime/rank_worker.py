"""One rank of ``compile-probe --nproc N``: join the group, probe, and (rank 0) write the merged records.

Started by :mod:`.launch` with torchrun's environment (``RANK``, ``WORLD_SIZE``,
``MASTER_ADDR``, ``MASTER_PORT``), so it runs exactly as it would under ``torchrun``. Bad input
(a ``--step`` that does not load) is one line prefixed with the isolate marker and exit 2, so
the launcher can say it as the CLI would. Run as
``python -m explorer.compile.runtime.rank_worker SPEC OUT``. It imports torch at its top and does
its work under ``__main__`` only, so the ranks of one probe are forked from one process that
imported torch and Dynamo once, frozen (:mod:`explorer.processes.template`).
"""

from __future__ import annotations

import json
import pickle
import sys
from datetime import timedelta
from pathlib import Path
from typing import Sequence

import torch._dynamo  # noqa: F401  in the template, frozen: no rank's collection walks it
import torch.distributed as dist

from explorer.errors import InputError, one_line
from explorer.processes.isolate import INPUT_ERROR, MARKER


def _probe(spec: dict) -> object:
    from explorer.compile.runtime.run import run_scenario, run_step
    from explorer.user_step import load_step

    if spec.get("scenario"):
        return run_scenario(
            spec["scenario"],
            spec.get("iterations"),
            spec.get("backend"),
            spec.get("config") or {},
            spec.get("source", "auto"),
            ranked=True,
        )
    step = load_step(spec["step"])
    return run_step(
        step,
        spec.get("iterations") or 20,
        spec.get("source", "auto"),
        label=spec["step"],
        ranked=True,
    )


def main(argv: Sequence[str]) -> int:
    spec = json.loads(Path(argv[0]).read_text())
    out = Path(argv[1])
    dist.init_process_group("gloo", timeout=timedelta(seconds=float(spec.get("timeout", 900))))
    try:
        result = _probe(spec)
        if dist.get_rank() == 0:  # whole or not at all: the launcher trusts a file that exists
            part = out.with_name(out.name + ".part")
            part.write_bytes(pickle.dumps(result))
            part.replace(out)
    except InputError as exc:
        print(MARKER + one_line(str(exc)), file=sys.stderr, flush=True)
        return INPUT_ERROR
    finally:
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

__all__ = ["main"]
