"""Text, JSON and CSV forms of a :class:`Schedule` that read back to the same schedule.

Text (for issues and diffs)::

    # explorer schedule
    # name=1f1b stages=2 microbatches=2 steps=6 stage_to_rank=0,1 buffers=2,1
    # params={"kind": "1f1b", "p2p": "batched"}
    rank 0 step 0: 0L0b0 0F0b0

JSON keeps the same facts plus ``streams[rank][step] = ["0L0b0", ...]`` and DeepSpeed's step
labels when present. CSV has one row per instruction for spreadsheets; it carries no header
facts, so stages, micro-batches and buffers are inferred when it is read back.
"""

from __future__ import annotations

import csv
import io
import json
import re
from typing import Any

import numpy as np

from explorer.errors import InputError
from explorer.schedules.instructions import parse_instruction
from explorer.schedules.schedule import Schedule, from_streams

JSON_FORMAT = "explorer.schedule/1"
CSV_FIELDS = ("rank", "step", "slot", "stage", "instruction", "kind", "microbatch", "buffer")


def to_text(schedule: Schedule) -> str:
    lines = [
        "# explorer schedule",
        f"# name={schedule.name} stages={schedule.num_stages} microbatches={schedule.num_microbatches} "
        f"steps={schedule.num_steps} stage_to_rank={_ints(schedule.stage_to_rank)} buffers={_ints(schedule.buffers)}",
        f"# params={json.dumps(_jsonable(schedule.params), sort_keys=True)}",
    ]
    for r, steps in enumerate(schedule.streams()):
        for t, instrs in enumerate(steps):
            if instrs:
                lines.append(f"rank {r} step {t}: " + " ".join(str(i) for i in instrs))
    return "\n".join(lines) + "\n"


_LINE = re.compile(r"^rank (\d+) step (\d+):(.*)$")


def from_text(text: str) -> Schedule:
    header: dict[str, str] = {}
    params: dict[str, Any] = {}
    cells: dict[tuple[int, int], list] = {}
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line == "# explorer schedule":
            continue
        if line.startswith("# params="):
            params = json.loads(line[len("# params="):])
            continue
        if line.startswith("#"):
            header.update(kv.split("=", 1) for kv in line[1:].split() if "=" in kv)
            continue
        m = _LINE.match(line)
        if not m:
            raise InputError(f"line {n}: expected 'rank R step T: INSTR ...', got {raw!r}")
        cells[(int(m[1]), int(m[2]))] = [parse_instruction(tok) for tok in m[3].split()]
    try:
        stage_to_rank = [int(x) for x in header["stage_to_rank"].split(",")]
        buffers = [int(x) for x in header["buffers"].split(",")]
        steps, mbs = int(header["steps"]), int(header["microbatches"])
    except (KeyError, ValueError) as exc:
        raise InputError(f"schedule text lacks a valid header line ({exc}): keep the '# name=... stages=...' line") from exc
    ranks = max(stage_to_rank) + 1
    streams = [[cells.get((r, t), []) for t in range(steps)] for r in range(ranks)]
    return from_streams(streams, num_microbatches=mbs, stage_to_rank=stage_to_rank, buffers=buffers,
                        name=header.get("name", "custom"), params=params)


def to_json(schedule: Schedule) -> dict:
    out = {
        "format": JSON_FORMAT,
        "name": schedule.name,
        "num_stages": schedule.num_stages,
        "num_microbatches": schedule.num_microbatches,
        "num_steps": schedule.num_steps,
        "stage_to_rank": list(schedule.stage_to_rank),
        "buffers": list(schedule.buffers),
        "params": _jsonable(schedule.params),
        "streams": [[[str(i) for i in instrs] for instrs in steps] for steps in schedule.streams()],
    }
    if schedule.step_labels is not None:
        out["step_labels"] = np.asarray(schedule.step_labels).tolist()
    return out


def from_json(data: dict) -> Schedule:
    if not isinstance(data, dict) or data.get("format") != JSON_FORMAT:
        raise InputError(f"not an explorer schedule: expected a JSON object with \"format\": \"{JSON_FORMAT}\"")
    streams = [[[parse_instruction(t) for t in step] for step in steps] for steps in data["streams"]]
    labels = data.get("step_labels")
    return from_streams(
        streams, num_microbatches=data["num_microbatches"], stage_to_rank=data["stage_to_rank"],
        buffers=data["buffers"], name=data.get("name", "custom"), params=data.get("params", {}),
        step_labels=None if labels is None else np.asarray(labels, dtype=np.int64),
    )


def to_csv(schedule: Schedule) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(CSV_FIELDS)
    for r, steps in enumerate(schedule.streams()):
        for t, instrs in enumerate(steps):
            for slot, ins in enumerate(instrs):
                writer.writerow((r, t, slot, ins.stage, str(ins), ins.kind.deepspeed_name, ins.microbatch, ins.buffer))
    return buf.getvalue()


def from_csv(text: str) -> Schedule:
    rows = list(csv.DictReader(io.StringIO(text)))
    if not rows or set(CSV_FIELDS) - set(rows[0]):
        raise InputError(f"CSV needs the columns {', '.join(CSV_FIELDS)}")
    ranks = max(int(r["rank"]) for r in rows) + 1
    steps = max(int(r["step"]) for r in rows) + 1
    streams: list[list[list]] = [[[] for _ in range(steps)] for _ in range(ranks)]
    for r in sorted(rows, key=lambda x: (int(x["rank"]), int(x["step"]), int(x["slot"]))):
        streams[int(r["rank"])][int(r["step"])].append(parse_instruction(r["instruction"]))
    return from_streams(streams)


def _ints(values) -> str:
    return ",".join(str(int(v)) for v in values)


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, (np.integer,)):
        return int(value)
    return value


__all__ = ["to_text", "from_text", "to_json", "from_json", "to_csv", "from_csv"]
