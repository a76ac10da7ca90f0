"""A finished run folder read back (``run --collect DIR``, ``explorer read DIR``): its files
checked before the collector reads them.

A run folder is written by ``explorer run`` (``spec.json``, ``rank<R>.jsonl``, ``result.json``),
but ``--collect`` reads whatever is there: an edited spec, a truncated or foreign JSON line, a
FIFO named ``spec.json``. Each such file is one :class:`InputError` naming the file and what
is wrong, instead of a ``KeyError`` from deep inside the collector.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Optional

from explorer import inputs
from explorer.errors import InputError, excerpt, one_line
from explorer.failure import Failure, FailureKind
from explorer.pipeline.traces.follow import parse_record
from explorer.pipeline.traces.job_folder import file_rank, stage_ranks, start_lines
from explorer.pipeline.traces.records_fit import RankLines, rank_rows

if TYPE_CHECKING:
    from explorer.pipeline.analysis.contract import ContractReport, ContractViolation
    from explorer.pipeline.runtime.spec import RunSpec
    from explorer.pipeline.schedules.schedule import Schedule
    from explorer.pipeline.traces.result import PipelineRunResult

#: Largest per-rank trace read back (a long run writes a few MB per rank).
MAX_TRACE_BYTES = 512 * 2**20


def collected(folder: Path, option: str = "") -> PipelineRunResult:
    """Read a run folder; anything in it that ``explorer run`` would not have written is one InputError.

    ``option``: the command-line option the folder was given with (``--collect``), named in
    those errors; empty when the user gave it as a plain path (``explorer read``, ``check``),
    so no message names an option they never typed."""
    from explorer.pipeline.analysis.contract import judged, pairing_of
    from explorer.pipeline.traces.result import collect

    spec = read_spec(folder, option)
    schedule = spec.build_schedule()
    records_checked(folder, option, spec, schedule)
    check_one_run(Path(folder), spec.run_id, option)
    _some_rank_wrote(Path(folder), spec.run_id, option)
    try:
        result = collect(folder, schedule, run_id=spec.run_id or None)
        return judged(result, schedule, pairing_of(spec.p2p_tags))
    except (
        KeyError,
        TypeError,
        ValueError,
        AttributeError,
        IndexError,
    ) as exc:  # a record of the wrong shape
        raise InputError(
            f"{_at(option, folder)}: a record in the folder is not one `explorer run` "
            f"writes ({type(exc).__name__}: {one_line(str(exc), 120)}); was it edited?"
        ) from None


def _some_rank_wrote(folder: Path, run_id: str, option: str) -> None:
    """A folder with no rank file at all holds nothing to judge, unless its run is starting
    (its launcher holds ``run.lock``; the ranks import torch before they write): then the
    collector says where it is. Every command refuses it alike, ``run --collect`` included."""
    from explorer.pipeline.traces.folder import launcher_running

    if any(folder.glob("rank*.jsonl")) or (run_id and launcher_running(folder, run_id)):
        return
    raise no_rank_wrote(folder, option)


def no_rank_wrote(folder: Path, option: str = "") -> InputError:
    """The one refusal of a run folder whose launcher is gone before any rank wrote a line,
    worded alike by every command that reads it (``read``, ``check``, ``run --collect``,
    ``doctor``)."""
    return InputError(
        f"{_at(option, folder)} holds spec.json but no rank<R>.jsonl: no rank of the run wrote "
        "a line (stopped while its ranks started?), so there is nothing to judge; run it again"
    )


def read_spec(folder: Path, option: str = "") -> RunSpec:
    """The folder's :class:`~explorer.pipeline.runtime.spec.RunSpec`, checked field by field
    (``option`` as for :func:`collected`)."""
    from explorer.pipeline.runtime.spec import RunSpec

    path = Path(folder) / "spec.json"
    if not path.exists() and not path.is_symlink():
        raise InputError(
            f"{excerpt(str(folder))} holds no spec.json: is it a run folder written by `explorer run`?"
        )
    data = inputs.read_json(str(path), option)
    if not isinstance(data, dict):
        raise InputError(
            f"{excerpt(str(path))} holds a JSON {type(data).__name__}, not the object `explorer run` "
            "writes: is it a run folder?"
        )
    if not isinstance(data.get("schedule"), dict):
        raise InputError(
            f"{excerpt(str(path))} has no schedule object: is it a run folder written by `explorer run`?"
        )
    if "stage_to_rank" in data["schedule"]:  # a missing one is named by the schedule's reader
        stage_ranks(data["schedule"], path)
    if not isinstance(data.get("model", {}), dict):
        raise InputError(
            f'{excerpt(str(path))}: \'model\' must be an object like {{"name": "mlp"}}'
        )
    for key, kinds, what in _FIELDS:
        value = data.get(key)
        if key in data and (
            isinstance(value, bool) and bool not in kinds or not isinstance(value, kinds)
        ):
            raise InputError(
                f"{excerpt(str(path))}: {key!r} must be {what}, got {excerpt(json.dumps(value))}"
            )
    try:
        return RunSpec.from_json(data)
    except InputError as exc:
        raise InputError(f"{excerpt(str(path))}: {exc}") from None
    except (TypeError, ValueError, KeyError, AttributeError) as exc:
        raise InputError(
            f"{excerpt(str(path))} is not a run spec `explorer run` writes "
            f"({type(exc).__name__}: {one_line(str(exc), 160)})"
        ) from None


#: Fields of spec.json with the JSON types ``explorer run`` writes.
_FIELDS = [
    ("backend", (str,), "a string"),
    ("device", (str,), "a string"),
    ("microbatch_size", (int,), "an integer"),
    ("iterations", (int,), "an integer"),
    ("seed", (int,), "an integer"),
    ("timing", (bool,), "true or false"),
    ("untimed_iterations", (int,), "an integer"),
    ("stall_timeout_s", (int, float), "a number"),
    ("threads", (int,), "an integer"),
    ("fault", (dict, type(None)), "an object or null"),
    ("run_id", (str,), "a string"),
    ("engine", (str,), "a string"),
    ("schedule_class", (str,), "a string"),
    ("p2p_tags", (bool,), "true or false"),
    ("recv_pool", (bool,), "true or false"),
]


def records_checked(
    folder: Path,
    option: str = "",
    spec: Optional[RunSpec] = None,
    schedule: Optional[Schedule] = None,
) -> None:
    """Every complete line of every ``rank*.jsonl`` is a record the ranks write (the follower's
    own check, :func:`~explorer.pipeline.traces.follow.parse_record`), before anything is read;
    with ``spec`` and its ``schedule``, each of its run's instruction lines is also one of the
    schedule's rows (:mod:`~explorer.pipeline.traces.records_fit`)."""
    for path in sorted(Path(folder).glob("rank*.jsonl")):
        text = inputs.read_text(str(path), option, MAX_TRACE_BYTES)
        complete = text[
            : text.rfind("\n") + 1
        ]  # a line still being written is left, as the collector does
        lines = _rank_lines(path, schedule, spec)
        for n, line in enumerate(complete.splitlines(), 1):
            if line.strip():
                record = parse_record(line, f"{path.name} line {n}")
                if lines is not None and (not spec or record.get("run") == spec.run_id):
                    lines.add(record, line, n)
        if lines is not None and spec is not None:
            lines.finish(spec.iterations)
    result = Path(folder) / "result.json"
    if result.exists() or result.is_symlink():
        result_checked(result, inputs.read_json(str(result), option))


def _rank_lines(
    path: Path, schedule: Optional[Schedule], spec: Optional[RunSpec]
) -> Optional[RankLines]:
    """The checker of one rank file's lines, or None where there is no schedule or the name
    gives no rank. A file beyond the schedule's ranks is held to its own rank only (a copy of
    rank 1's file as rank5.jsonl was read as more of rank 1's lines: "12 lines, every message
    matches" for a run of 8). Rows are held only for the explorer's engine, whose steps are the
    schedule's own."""
    rank = file_rank(path)
    if schedule is None or spec is None or rank is None:
        return None
    ours = spec.engine == "explorer" and rank < schedule.num_ranks
    rows = rank_rows(schedule, rank) if ours else None
    return RankLines(schedule, rank, path.name, rows)


def result_checked(path: Path, doc: object) -> None:
    """``result.json`` as ``explorer run`` writes it: an object with a list of losses (null where
    a loss was not finite), every number finite (``1e999`` parses as infinity, which no JSON
    output can carry), a true or false comparison, and no claim its own figures deny: "bitwise
    equal" with losses or a digest unlike the reference's is an edited file, not a verdict."""
    what = excerpt(str(path))
    if (
        not isinstance(doc, dict)
        or not isinstance(doc.get("losses"), list)
        or not all(x is None or isinstance(x, (int, float)) for x in doc["losses"])
    ):
        raise InputError(
            f"{what} is not the result `explorer run` writes "
            "(an object with a list of losses, null where a loss was not finite): was it edited?"
        )
    infinite = _first_infinite(doc)
    if infinite is not None:
        raise InputError(
            f"{what} has {infinite} beyond a float (read as infinity; the run writes finite "
            "numbers and null): was it edited? run again"
        )
    said = doc.get("bitwise_equal_to_reference")
    if doc.get("ok") is not True or not isinstance(said, bool):
        raise InputError(
            f"{what} is not the result `explorer run` writes (ok: true and a true or false "
            "bitwise_equal_to_reference): was it edited? run again"
        )
    denied = [
        f"its {mine} {verb} from {theirs}"
        for mine, theirs, verb in (
            ("losses", "reference_losses", "differ"),
            ("digest", "reference_digest", "differs"),
        )
        if theirs in doc and doc.get(mine) != doc[theirs]
    ]
    if said and denied:
        raise InputError(
            f"{what} contradicts itself: it says bitwise equal to the reference, but "
            f"{' and '.join(denied)}: was it edited? run again"
        )


def _first_infinite(doc: object, where: str = "") -> Optional[str]:
    """The key path of the first number in ``doc`` that is not finite, else None."""
    if isinstance(doc, float) and not math.isfinite(doc):
        return where or "a number"
    items = (
        doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else ()
    )
    for key, value in items:
        found = _first_infinite(value, f"{where}.{key}" if where else str(key))
        if found is not None:
            return found
    return None


def check_one_run(folder: Path, run_id: str, option: str = "") -> None:
    """The rank files are of the run ``spec.json`` describes. Where every one that names a run
    names another, the spec was copied in from elsewhere: its schedule would judge another run's
    records, so the folder is refused, naming the two runs."""
    if not run_id:
        return
    others = {}
    for path in sorted(folder.glob("rank*.jsonl")):
        runs = [x["run"] for x in start_lines(path) if isinstance(x.get("run"), str)]
        if run_id in runs:
            return  # at least one rank of this run: a missing or foreign rank is said per rank
        if runs:
            others[path.name] = runs[0]
    if others:
        name, other = next(iter(others.items()))
        raise InputError(
            f"{_at(option, folder)} mixes two runs: spec.json is run {run_id}, but {name} (and "
            f"every rank file) is run {other}; copy the whole folder of one run, or run again "
            "into an empty folder"
        )


def torch_contract(folder: Path) -> Optional[tuple[Schedule, list[ContractViolation]]]:
    """A PyTorch engine run folder's contract: the schedule its runtime executed and every
    violation among its ``message`` lines (:mod:`.torch_messages`); None for a folder without
    the runtime's order (a profiler dump from elsewhere: nothing to check).

    PyTorch posts every exchange untagged (``P2POp``'s tag 0), so messages between two ranks
    pair first in, first out whatever their stage or direction: the ``peer`` rule.
    """
    from explorer.pipeline.analysis.contract import check_contract

    found = _torch_messages(Path(folder))
    if found is None:
        return None
    schedule, records = found
    return schedule, check_contract(schedule, records, "peer")


def _torch_messages(folder: Path) -> Optional[tuple[Schedule, list[dict]]]:
    """The runtime's executed schedule (``torch_order.json``) and the folder's message lines."""
    from explorer.pipeline.schedules.torch_csv import ORDER_FILE, runtime_schedule

    path = folder / ORDER_FILE
    if not path.exists() and not path.is_symlink():
        return None
    order = inputs.read_json(str(path), "")
    if not isinstance(order, dict) or not all(
        isinstance(acts, list) and all(isinstance(a, str) for a in acts) for acts in order.values()
    ):
        raise InputError(
            f"{excerpt(str(path))} is not the order PyTorch's engine writes (an object of rank -> "
            "list of action texts like 1SEND_F0): was it edited?"
        )
    try:
        schedule = runtime_schedule(order)
    except (InputError, ValueError, KeyError, TypeError) as exc:
        raise InputError(f"{excerpt(str(path))}: {one_line(str(exc), 160)}") from None
    return schedule, _message_lines(folder, schedule)


def _message_lines(folder: Path, schedule: Schedule) -> list[dict]:
    """Every ``message`` line of the folder's ``torch_rank*.jsonl``, each checked, and each at
    an exchange of ``schedule`` (a line at another place is not one the engine wrote)."""
    from explorer.pipeline.analysis.contract import exchange_places

    places = exchange_places(schedule)
    out = []
    for path in sorted(folder.glob("torch_rank*.jsonl")):
        text = inputs.read_text(str(path), "", MAX_TRACE_BYTES)
        for n, line in enumerate(text[: text.rfind("\n") + 1].splitlines(), 1):
            if not line.strip():
                continue
            record = parse_record(line, f"{path.name} line {n}")
            if record["type"] != "message":
                continue
            if (record["stage"], record["step"], record["text"]) not in places:
                raise InputError(
                    f"{path.name} line {n}: {excerpt(record['text'])} at stage {record['stage']} "
                    f"step {record['step']} is no exchange of the order in the folder; was it edited?"
                )
            out.append(record)
    return out


def recorded_contract(folder: Path) -> ContractReport:
    """``explorer check RUN_FOLDER``: the P2P contract of a recorded run, read by the reader
    ``explorer read`` uses for its kind: a run folder of ``explorer run`` (the explorer's engine
    or DeepSpeed's), of ``explorer run --engine torch``, or a DeepSpeed job's
    ``explorer.instrument`` folder. Anything else, or lines that describe only some messages,
    is one InputError."""
    from explorer.pipeline.analysis.contract import contract_report, pairing_of
    from explorer.pipeline.traces.instrumented import is_instrumented, read_instrumented

    path = Path(folder)
    if is_instrumented(path):
        run = read_instrumented(path)
        schedule = run.schedule()
        if schedule is None:
            raise InputError(
                f"{excerpt(str(path))}: not every stage has written the schedule it runs yet; "
                "check again once each stage has started an iteration"
            )
        report = contract_report("explorer.instrument's trace", schedule, run.follower.records)
        ended = run.failure()
        if report.violations or ended is None:
            return report
        return replace(report, run_failure=Failure.from_dict(ended))  # as explorer read says
    torch_run = _torch_messages(path) if (path / "spec.json").is_file() else None
    if torch_run is not None:
        report = contract_report("PyTorch's pipelining runtime", *torch_run, "peer")
        return _torch_verdict(report, path)
    ours = any(path.glob("rank*.jsonl")) or (path / "run.lock").is_file()  # run.lock: starting
    if not (path / "spec.json").is_file() or not ours:
        raise InputError(
            f"{excerpt(str(path))} is not a run folder: expected spec.json with rank<R>.jsonl "
            "(explorer run --out), torch_order.json (--engine torch) or the rank<R>.jsonl of "
            "explorer.instrument"
        )
    result = collected(path)
    spec = read_spec(path)
    report = contract_report(
        f"the {spec.engine} engine's run",
        spec.build_schedule(),
        result.records,
        pairing_of(spec.p2p_tags),
    )
    if report.violations:
        return report
    if result.failure is None and result.ok and not result.bitwise_equal_to_reference:
        return replace(report, wrong_result=_NOT_BITWISE)  # as explorer run and read said
    if result.failure is None:
        return report
    return replace(report, run_failure=result.failure)  # what explorer read says of the folder


#: A run of the explorer's engine (or DeepSpeed's) that finished off the reference.
_NOT_BITWISE = (
    "its micro-batch losses and final gradients are DIFFERENT from the reference (not bitwise "
    "equal), as explorer run and explorer read say of this folder"
)


def _torch_verdict(report: ContractReport, path: Path) -> ContractReport:
    """A PyTorch engine run's contract with how the run ended: no ``torch_result.json`` is a run
    that never finished; one off the reference is a wrong result (``--engine torch``'s verdict)."""
    from explorer.pipeline.traces.torch_result import RESULT_FILE, read_reference, wrong_result

    if report.violations:
        return report
    reference = read_reference(path)
    if reference is None:
        return replace(
            report,
            run_failure=Failure(
                FailureKind.UNFINISHED,
                f"the run wrote no {RESULT_FILE}: it did not finish (read the folder with "
                "explorer read for how far each rank came)",
            ),
        )
    wrong = wrong_result(reference)
    return replace(report, wrong_result=wrong) if wrong else report


def _at(option: str, folder: Path) -> str:
    """``--collect '/x/run'``, or just ``'/x/run'`` when the folder came as a plain path."""
    return f"{option} {excerpt(str(folder))}" if option else excerpt(str(folder))


__all__ = [
    "check_one_run",
    "collected",
    "no_rank_wrote",
    "read_spec",
    "recorded_contract",
    "records_checked",
    "torch_contract",
]
