"""The one error type HLO parsing raises.

Malformed HLO (a truncated dump, a hand-edited line, a file that is not HLO at all) must reach
the user as one sentence that says where and what, never as an ``IndexError`` from deep inside
the parser: the CLI turns it into exit code 2, the notebook shows the message.
"""

from __future__ import annotations

from explorer.errors import InputError, one_line


class HloParseError(InputError):
    """Malformed HLO text, with the 1-based line and column and the offending text."""

    def __init__(self, message: str, line: int, column: int, text: str, source: str = "") -> None:
        snippet = text if len(text) <= 120 else text[:117] + "..."
        where = f"{source}:" if source else "line "
        # Names in the message come from the file: a 5,000-character one is quoted as an excerpt.
        super().__init__(f"{where}{line}:{column}: {one_line(message, 300)}: {snippet!r}")
        self.message = message
        self.line = line
        self.column = column
        self.text = text
        self.source = source

    def with_source(self, source: str) -> "HloParseError":
        """The same error, naming the file it came from."""
        return HloParseError(self.message, self.line, self.column, self.text, source)


__all__ = ["HloParseError"]
