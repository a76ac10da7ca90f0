"""One definition of a JSON document's ``ok``, for every command: true exactly when it exits 0.

A script reads ``ok``, a shell reads the exit status; both ask "is this clean?" and must get one
answer. The runs' own records used ``ok`` for "the processes finished" while the exit status
also counted what the run found (a result different from the reference, a recompile after the
warm-up, a period, a departure from the plan), so a run with a finding printed ``"ok": true``
and exited 1. Each command now decides its exit code first and stamps its document with it;
``failure`` still says whether (and why) the run itself ended badly.
"""

from __future__ import annotations

from typing import Any, Mapping


def with_verdict(doc: Mapping[str, Any], code: int) -> dict[str, Any]:
    """``doc`` with ``ok`` set to ``code == 0``: in its place where it had one, else first."""
    if "ok" in doc:
        out = dict(doc)
        out["ok"] = code == 0
        return out
    return {"ok": code == 0, **doc}


__all__ = ["with_verdict"]
