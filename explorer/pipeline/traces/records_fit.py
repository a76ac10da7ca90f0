"""A run folder's instruction lines held against the schedule its ``spec.json`` names.

The explorer's ranks write one ``instr`` line per instruction they ran, in their own file
(``rank<R>.jsonl``): its rank is the file's, its stage one the schedule runs on that rank, its
``(step, text)`` a row of that rank's stream with that row's micro-batch. A rank that wrote its
end ran every row of every timed iteration once. A line that is none of this was edited, copied
in from another run or damaged: the verdict built on it would describe no run (a line of stage
5 in a 2-stage run was dropped without a word, and a deleted send left "every message matches").
Each such line is one :class:`InputError` naming the file and line, exit 2 at the door.

Pure: the schedule's columns and dicts of the parsed lines.
"""

from __future__ import annotations

from collections import Counter
from typing import Optional

from explorer.errors import InputError, excerpt
from explorer.pipeline.schedules.schedule import Schedule

#: ``(step, text)`` -> micro-batch, for each row of one rank's stream.
Rows = dict[tuple[int, str], int]


def rank_rows(schedule: Schedule, rank: int) -> Rows:
    """Every row of ``rank``'s stream, keyed as its lines name it."""
    sl = schedule.rank_slice(rank)
    return {
        (int(schedule.step[i]), str(schedule.instruction(i))): int(schedule.microbatch[i])
        for i in range(sl.start, sl.stop)
    }


class RankLines:
    """One rank file's instruction lines, checked one at a time against the schedule."""

    def __init__(self, schedule: Schedule, rank: int, name: str, rows: Optional[Rows]) -> None:
        self.schedule, self.rank, self.name = schedule, rank, name
        self.rows = rows  # None: the engine numbers its steps its own way (place only the stage)
        self.seen: Counter[tuple[int, int, str]] = Counter()
        self.ended = False

    def add(self, record: dict, line: str, n: int) -> None:
        """Check one parsed line (any type) of this file."""
        if record["type"] == "done":
            self.ended = True
        if record["type"] != "instr":
            return
        where = f"{self.name} line {n}"
        if record["rank"] != self.rank:  # a copy under another name: its lines would count twice
            raise _refuse(where, line, f"says rank {record['rank']}, in rank {self.rank}'s file")
        if self.rank >= self.schedule.num_ranks:
            return  # a replica's own file (a job's folder): the job's reader places its lines
        stage, stages = record["stage"], self.schedule.num_stages
        if not 0 <= stage < stages:
            raise _refuse(
                where,
                line,
                f"names stage {stage}; spec.json's schedule has stages 0 to {stages - 1}",
            )
        if self.schedule.stage_to_rank[stage] != self.rank:
            holder = self.schedule.stage_to_rank[stage]
            raise _refuse(
                where,
                line,
                f"names stage {stage}, which spec.json's schedule runs on rank {holder}",
            )
        if self.rows is None:
            return
        key = (record["step"], str(record.get("text")))
        if key not in self.rows:
            raise _refuse(
                where, line, f"is no instruction of rank {self.rank}'s stream at step {key[0]}"
            )
        microbatch = record.get("microbatch", self.rows[key])
        if microbatch != self.rows[key]:
            raise _refuse(
                where, line, f"says micro-batch {microbatch} where its row runs {self.rows[key]}"
            )
        self.seen[(record["iteration"], *key)] += 1

    def finish(self, iterations: int) -> None:
        """A rank that wrote its end ran each row once in each timed iteration: a line missing
        or written twice is an edited file (its verdict would pair the wrong messages)."""
        if self.rows is None or not self.ended:  # no rows: another engine, or beyond the ranks
            return
        twice = next((k for k, c in self.seen.items() if c > 1), None)
        if twice is not None:
            raise InputError(
                f"{self.name} holds {twice[2]} at step {twice[1]} of iteration {twice[0]} "
                f"{self.seen[twice]} times, though each instruction runs once: was the file "
                "edited? run again"
            )
        ran = sorted({it for it, _, _ in self.seen})
        for it in ran:
            missing = [k for k in self.rows if (it, *k) not in self.seen]
            if missing:
                step, text = min(missing)
                raise InputError(
                    f"{self.name} wrote its end but has no line for {text} at step {step} of "
                    f"iteration {it} ({len(missing)} of rank {self.rank}'s {len(self.rows)} "
                    "instructions missing): was the file edited or cut? run again"
                )
        if self.rows and len(ran) != iterations:
            raise InputError(
                f"{self.name} wrote its end after {len(ran)} timed iteration(s) of instruction "
                f"lines; spec.json's run times {iterations}: was the file edited? run again"
            )


def _refuse(where: str, line: str, what: str) -> InputError:
    return InputError(
        f"{where} {what}: {excerpt(line)}; was the file edited, or copied in from another run?"
    )


__all__ = ["RankLines", "Rows", "rank_rows"]
