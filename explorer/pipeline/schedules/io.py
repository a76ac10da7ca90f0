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

from explorer.cli_options import MAX_MICROBATCHES, MAX_STAGES
from explorer.errors import InputError, excerpt
from explorer.pipeline.schedules.instructions import parse_instruction
from explorer.pipeline.schedules.schedule import Schedule, from_streams

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
            params = json.loads(line[len("# params=") :])
            continue
        if line.startswith("#"):
            header.update(
                (k, v) for k, eq, v in (kv.partition("=") for kv in line[1:].split()) if eq
            )
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
        raise InputError(
            f"schedule text lacks a valid header line ({exc}): keep the '# name=... stages=...' line"
        ) from exc
    ranks = max(stage_to_rank) + 1
    streams = [[cells.get((r, t), []) for t in range(steps)] for r in range(ranks)]
    return from_streams(
        streams,
        num_microbatches=mbs,
        stage_to_rank=stage_to_rank,
        buffers=buffers,
        name=header.get("name", "custom"),
        params=params,
    )


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
    """The schedule written by :func:`to_json`; anything else is one InputError naming the field."""
    if not isinstance(data, dict) or data.get("format") != JSON_FORMAT:
        raise InputError(
            f'not an explorer schedule: expected a JSON object with "format": "{JSON_FORMAT}"'
        )
    streams_in = _field(data, "streams", list)
    streams = [
        [
            [_instruction(t) for t in _listed(step, "a step")]
            for step in _listed(steps, "a rank's steps")
        ]
        for steps in streams_in
    ]
    if sum(len(step) for steps in streams for step in steps) > MAX_ROWS:
        raise InputError(
            f"the schedule holds more than {MAX_ROWS:,} instructions: more than the analyses hold in memory"
        )
    mbs = _count(data, "num_microbatches")
    stage_to_rank = [_id(v, "stage_to_rank") for v in _field(data, "stage_to_rank", list)]
    buffers = [_id(v, "buffers") for v in _field(data, "buffers", list)]
    if not stage_to_rank or len(buffers) != len(stage_to_rank):
        raise InputError(
            f"the schedule's stage_to_rank ({len(stage_to_rank)} entries) and buffers "
            f"({len(buffers)}) must both have one entry per stage"
        )
    _check_places(streams, stage_to_rank, buffers, mbs)
    params = data.get("params", {})
    if not isinstance(params, dict):
        raise InputError(
            f"the schedule's params must be a JSON object, got {type(params).__name__}"
        )
    name = data.get("name", "custom")
    labels = data.get("step_labels")
    try:
        label_arr = None if labels is None else np.asarray(labels, dtype=np.int64)
    except (TypeError, ValueError, OverflowError):
        raise InputError(
            "the schedule's step_labels must be a list of lists of integers, one per rank and step"
        ) from None
    if label_arr is not None and label_arr.ndim != 2:
        raise InputError(
            "the schedule's step_labels must be a list of lists of integers, one per rank and step"
        )
    try:
        return from_streams(
            streams,
            num_microbatches=mbs,
            stage_to_rank=stage_to_rank,
            buffers=buffers,
            name=str(name),
            params=params,
            step_labels=label_arr,
        )
    except ValueError as exc:  # the Schedule's own consistency checks
        raise InputError(f"the schedule is inconsistent: {exc}") from None


#: Most instructions a schedule read from a file may hold (the CLI's size limit, with room to spare).
MAX_ROWS = 2**25
#: (rank, step) cells a read-back CSV may span: its streams are one list per cell.
MAX_CSV_GRID = MAX_ROWS // 2
_MAX_ID = 2**31 - 1
_MAX_TOKEN = 40


def _field(data: dict, key: str, kind: type) -> Any:
    if key not in data:
        raise InputError(
            f"the schedule lacks {key!r}: write it with explorer's to_json (or `explorer schedule --format json`)"
        )
    value = data[key]
    if not isinstance(value, kind) or isinstance(value, bool):
        raise InputError(
            f"the schedule's {key!r} must be a {'list' if kind is list else kind.__name__}, "
            f"got {type(value).__name__}"
        )
    return value


def _listed(value: Any, what: str) -> list:
    if not isinstance(value, list):
        raise InputError(
            f"the schedule's streams: {what} must be a list, got {type(value).__name__}"
        )
    return value


def _id(value: Any, key: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= _MAX_ID:
        raise InputError(
            f"the schedule's {key} entries must be integers 0..{_MAX_ID:,}, got {excerpt(repr(value))}"
        )
    return value


def _count(data: dict, key: str) -> int:
    value = _field(data, key, int)
    if value < 1 or value > _MAX_ID:
        raise InputError(
            f"the schedule's {key} must be a positive integer up to {_MAX_ID:,}, got {excerpt(repr(value))}"
        )
    return value


def _check_places(streams: list, stage_to_rank: list[int], buffers: list[int], mbs: int) -> None:
    """Every instruction sits on its stage's rank, with a micro-batch and a buffer that exist."""
    if len(streams) != max(stage_to_rank) + 1:
        raise InputError(
            f"the schedule has {len(streams)} ranks of streams but stage_to_rank names "
            f"{max(stage_to_rank) + 1} ranks"
        )
    for r, steps in enumerate(streams):
        for t, step in enumerate(steps):
            for ins in step:
                if ins.stage >= len(stage_to_rank) or stage_to_rank[ins.stage] != r:
                    raise InputError(
                        f"rank {r} step {t}: instruction {str(ins)!r} names stage {ins.stage}, which "
                        f"is not on rank {r} (stage_to_rank {excerpt(str(stage_to_rank))})"
                    )
                if ins.microbatch >= mbs or ins.buffer >= buffers[ins.stage]:
                    raise InputError(
                        f"rank {r} step {t}: instruction {str(ins)!r} is outside the schedule's "
                        f"{mbs} micro-batches or stage {ins.stage}'s {buffers[ins.stage]} buffers"
                    )


def _instruction(token: Any):
    """One ``2RA2b0`` token, checked for type and size before it is parsed."""
    if not isinstance(token, str):
        raise InputError(
            f"the schedule's streams hold {excerpt(repr(token))}: instructions are text like '2F0'"
        )
    if len(token) > _MAX_TOKEN:
        raise InputError(
            f"instruction {excerpt(token)} is longer than {_MAX_TOKEN} characters: write it like '2RA2b0'"
        )
    ins = parse_instruction(token)
    if max(ins.stage, ins.microbatch, ins.buffer) > _MAX_ID:
        raise InputError(
            f"instruction {token!r}: stage, micro-batch and buffer are at most {_MAX_ID:,}"
        )
    return ins


def to_csv(schedule: Schedule) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(CSV_FIELDS)
    for r, steps in enumerate(schedule.streams()):
        for t, instrs in enumerate(steps):
            for slot, ins in enumerate(instrs):
                writer.writerow(
                    (
                        r,
                        t,
                        slot,
                        ins.stage,
                        str(ins),
                        ins.kind.deepspeed_name,
                        ins.microbatch,
                        ins.buffer,
                    )
                )
    return buf.getvalue()


def is_explorer_csv(text: str) -> bool:
    """Whether ``text`` starts with :func:`to_csv`'s header (not PyTorch's schedule CSV)."""
    return text.lstrip("\ufeff").split("\n", 1)[0].strip() == ",".join(CSV_FIELDS)


def from_csv(text: str) -> Schedule:
    """The schedule written by :func:`to_csv`, each row checked before anything is sized by it:
    rank, step and slot as bounded integers, the instruction as :func:`from_json` reads its
    tokens, and the stages and micro-batches within the limits ``--stages`` and
    ``--microbatches`` have (one row at rank 1,000, step 10,000,000 would size the grid)."""
    rows = list(csv.DictReader(io.StringIO(text.lstrip("\ufeff"))))
    if not rows or set(CSV_FIELDS) - set(rows[0]):
        raise InputError(f"CSV needs the columns {', '.join(CSV_FIELDS)}")
    if len(rows) > MAX_ROWS:
        raise InputError(
            f"the CSV holds more than {MAX_ROWS:,} instructions: more than the analyses hold in memory"
        )
    placed = [_placed(row, line) for line, row in enumerate(rows, start=2)]
    ranks = max(p[0] for p in placed) + 1
    steps = max(p[1] for p in placed) + 1
    if ranks * steps > MAX_CSV_GRID:
        raise InputError(
            f"the CSV's {ranks:,} ranks x {steps:,} steps are more than the analyses hold; "
            "number the steps from 0 without long gaps"
        )
    streams: list[list[list]] = [[[] for _ in range(steps)] for _ in range(ranks)]
    for rank, step, _slot, ins in sorted(placed, key=lambda p: p[:3]):
        streams[rank][step].append(ins)
    return from_streams(streams)


def _placed(row: dict, line: int) -> tuple[int, int, int, Any]:
    """``(rank, step, slot, instruction)`` of one CSV row, each checked (see :func:`from_csv`)."""
    where = f"line {line}"
    rank, step, slot = (_row_int(row.get(k), k, where) for k in ("rank", "step", "slot"))
    if rank >= MAX_STAGES:
        raise InputError(
            f"{where}: rank {rank:,} is beyond the {MAX_STAGES:,} ranks a schedule may have"
        )
    ins = _instruction(row.get("instruction"))
    if ins.stage >= MAX_STAGES or max(ins.microbatch, ins.buffer) >= MAX_MICROBATCHES:
        raise InputError(
            f"{where}: instruction {str(ins)!r} is beyond the limits of {MAX_STAGES:,} stages and "
            f"{MAX_MICROBATCHES:,} micro-batches (and buffers) that --stages and --microbatches have"
        )
    _columns_agree(row, ins, where)
    return rank, step, slot, ins


def _columns_agree(row: dict, ins: Any, where: str) -> None:
    """The columns that repeat the instruction (stage, kind, micro-batch, buffer) say what its
    text says, or are left empty: the text is what is read, so an edited ``microbatch`` cell
    was ignored without a word and the verdict was about another schedule than the file."""
    said = {
        "stage": str(ins.stage),
        "kind": ins.kind.deepspeed_name,
        "microbatch": str(ins.microbatch),
        "buffer": str(ins.buffer),
    }
    for column, value in said.items():
        cell = row.get(column)
        if isinstance(cell, str) and cell.strip() and cell.strip() != value:
            raise InputError(
                f"{where}: the {column} column says {excerpt(cell.strip())} but the instruction "
                f"{str(ins)!r} has {value}; the instruction column is what is read: make the two "
                "agree, or leave the column empty"
            )


def _row_int(text: Any, key: str, where: str) -> int:
    if not isinstance(text, str) or not text.strip().isdigit() or len(text.strip()) > 10:
        shown = excerpt(text) if isinstance(text, str) else "(missing)"
        raise InputError(f"{where}: {key} {shown} is not an integer 0..{_MAX_ID:,}")
    value = int(text.strip())
    if value > _MAX_ID:
        raise InputError(f"{where}: {key} {value:,} is beyond {_MAX_ID:,}")
    return value


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


__all__ = [
    "to_text",
    "from_text",
    "to_json",
    "from_json",
    "to_csv",
    "from_csv",
    "is_explorer_csv",
]
