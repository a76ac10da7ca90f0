"""A finished run folder read back (``run --collect DIR``, ``explorer read DIR``): its files
checked before the collector reads them.

A run folder is written by ``explorer run`` (``spec.json``, ``rank<R>.jsonl``, ``result.json``),
but ``--collect`` reads whatever is there: an edited spec, a truncated or foreign JSON line, a
FIFO named ``spec.json``. Each such file is one :class:`InputError` naming the file and what
is wrong, instead of a ``KeyError`` from deep inside the collector.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Optional

from explorer import inputs
from explorer.errors import InputError, excerpt, one_line
from explorer.failure import Failure, FailureKind
from explorer.pipeline.traces.follow import parse_record
from explorer.pipeline.traces.job_folder import stage_ranks, start_lines

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
    records_checked(folder, option)
    check_one_run(Path(folder), spec.run_id, option)
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


def records_checked(folder: Path, option: str = "") -> None:
    """Every complete line of every ``rank*.jsonl`` is a record the ranks write (the follower's
    own check, :func:`~explorer.pipeline.traces.follow.parse_record`), before anything is read."""
    for path in sorted(Path(folder).glob("rank*.jsonl")):
        text = inputs.read_text(str(path), option, MAX_TRACE_BYTES)
        complete = text[
            : text.rfind("\n") + 1
        ]  # a line still being written is left, as the collector does
        for n, line in enumerate(complete.splitlines(), 1):
            if line.strip():
                parse_record(line, f"{path.name} line {n}")
    result = Path(folder) / "result.json"
    if result.exists() or result.is_symlink():
        doc = inputs.read_json(str(result), option)
        if (
            not isinstance(doc, dict)
            or not isinstance(doc.get("losses"), list)
            or not all(x is None or isinstance(x, (int, float)) for x in doc["losses"])
        ):
            raise InputError(
                f"{excerpt(str(result))} is not the result `explorer run` writes "
                "(an object with a list of losses, null where a loss was not finite): was it edited?"
            )


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
    order = inputs.read_json(str(path), "explorer read")
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
        text = inputs.read_text(str(path), "explorer read", MAX_TRACE_BYTES)
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
    if not (path / "spec.json").is_file() or not any(path.glob("rank*.jsonl")):
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
    "read_spec",
    "recorded_contract",
    "records_checked",
    "torch_contract",
]
