"""The child's messages to the parent: one JSON object per line on stdout, behind a marker.

The user's step may print anything to stdout, even a line without its newline, so a message
is recognised by the marker anywhere in a line, not by position. Pure python.
"""

from __future__ import annotations

import json
from typing import Any, Optional

MARK = "@@explorer-xla "


def encode(event: str, **fields: Any) -> str:
    """One message line (with its newline)."""
    return "\n" + MARK + json.dumps({"event": event, **fields}) + "\n"


def decode(line: str) -> Optional[dict[str, Any]]:
    """The message in ``line``, or None for the child's own output."""
    at = line.find(MARK)
    if at < 0:
        return None
    try:
        msg = json.loads(line[at + len(MARK) :])
    except json.JSONDecodeError:
        return None
    return msg if isinstance(msg, dict) and "event" in msg else None


__all__ = ["MARK", "encode", "decode"]
