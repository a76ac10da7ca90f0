"""A lesson's source: markdown prose with explorer directives in fenced blocks.

A lesson is one ``.md`` file. It opens with a front matter of ``key: value`` lines between
``---`` lines (``title``, ``summary``, ``notebook``), then markdown. A fenced block whose
language is a directive name (``explore``, ``question``, ``fixes``, ``recorded``) is not shown
as code: the build replaces it with what the analyses computed. Inside a directive::

    ```question
    ask: first-hazard                      <- key: value lines (a key may repeat)
    setup: deepspeed-train buffers=fixed order=legacy
    size: 4x8

    Click the first instruction that reads the wrong buffer.   <- the prompt (markdown)
    ---
    The explanation, shown once the student has answered.      <- after a line of ---
    ```

Markdown on GitHub shows such a file readably as it is, and a teacher writes no JavaScript.
Pure: this module reads text and returns records.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Union

from explorer.errors import InputError

#: The directive names a fenced block may carry.
DIRECTIVES = ("explore", "question", "fixes", "recorded")
FRONT_KEYS = ("title", "summary", "notebook")


class LessonError(InputError):
    """A lesson source that cannot be built: the message names the file, the line and the fix."""


@dataclass(frozen=True)
class Directive:
    """One fenced directive: its ``key: value`` fields in order, its prompt and its explanation."""

    name: str
    fields: tuple[tuple[str, str], ...]
    prompt: str
    explain: str
    where: str  # "file.md:12", for messages

    def get(self, key: str, default: Optional[str] = None) -> Optional[str]:
        """The last value given for ``key`` (``default`` when absent)."""
        values = self.all(key)
        return values[-1] if values else default

    def need(self, key: str) -> str:
        """The value of a required ``key``; a missing one is the teacher's to add."""
        value = self.get(key)
        if not value:
            raise LessonError(f"{self.where}: the {self.name} block needs a '{key}: ...' line")
        return value

    def all(self, key: str) -> list[str]:
        """Every value given for a repeatable ``key`` (``setup``, ``option``), in order."""
        return [v for k, v in self.fields if k == key]

    def fail(self, message: str) -> LessonError:
        return LessonError(f"{self.where}: {message}")


Block = Union[str, Directive]  # markdown text, or a directive


@dataclass(frozen=True)
class LessonSource:
    """One lesson file, parsed: its slug (the file name), front matter and blocks in order."""

    slug: str
    title: str
    summary: str
    notebook: str
    blocks: tuple[Block, ...]


def read_lesson(path: Path) -> LessonSource:
    """Parse the lesson at ``path`` (see the module docstring for the format)."""
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise LessonError(
            f"{path.name}: not UTF-8 at byte {exc.start}: save the lesson as UTF-8 text"
        ) from None
    return parse_lesson(text, path.stem, path.name)


def parse_lesson(text: str, slug: str, name: str = "lesson.md") -> LessonSource:
    """Parse lesson ``text``; ``name`` is used in messages only."""
    lines = text.splitlines()
    front, start = _front_matter(lines, name)
    blocks: list[Block] = []
    prose: list[str] = []
    i = start
    while i < len(lines):
        line = lines[i]
        fence = line.strip()
        if fence.startswith("```") and fence[3:].strip() in DIRECTIVES:
            end = _closing_fence(lines, i, name)
            if prose:
                blocks.append("\n".join(prose))
                prose = []
            blocks.append(_directive(fence[3:].strip(), lines[i + 1 : end], f"{name}:{i + 1}"))
            i = end + 1
            continue
        prose.append(line)
        i += 1
    if prose:
        blocks.append("\n".join(prose))
    title = front.get("title") or ""
    if not title:
        raise LessonError(f"{name}: the front matter needs a 'title: ...' line")
    return LessonSource(
        slug=slug,
        title=title,
        summary=front.get("summary", ""),
        notebook=front.get("notebook", ""),
        blocks=tuple(blocks),
    )


def _front_matter(lines: list[str], name: str) -> tuple[dict[str, str], int]:
    if not lines or lines[0].strip() != "---":
        raise LessonError(f"{name}:1: a lesson starts with a '---' line, then 'title: ...'")
    front: dict[str, str] = {}
    for i in range(1, len(lines)):
        line = lines[i].strip()
        if line == "---":
            return front, i + 1
        key, sep, value = line.partition(":")
        if not sep or key.strip() not in FRONT_KEYS:
            raise LessonError(
                f"{name}:{i + 1}: front matter lines are 'key: value' with key one of "
                f"{', '.join(FRONT_KEYS)}; got {line!r}"
            )
        front[key.strip()] = value.strip()
    raise LessonError(f"{name}: the front matter has no closing '---' line")


def _closing_fence(lines: list[str], start: int, name: str) -> int:
    for j in range(start + 1, len(lines)):
        if lines[j].strip() == "```":
            return j
    raise LessonError(f"{name}:{start + 1}: this directive block has no closing ``` line")


def _directive(name: str, body: list[str], where: str) -> Directive:
    """Fields up to the first blank line, then the prompt, then ``---`` and the explanation."""
    fields: list[tuple[str, str]] = []
    i = 0
    while i < len(body) and body[i].strip():
        key, sep, value = body[i].partition(":")
        if not sep or not key.strip().replace("-", "").isalnum():
            raise LessonError(
                f"{where}: directive lines are 'key: value' until the first blank line; "
                f"got {body[i].strip()!r}"
            )
        fields.append((key.strip(), value.strip()))
        i += 1
    rest = body[i:]
    cut = next((j for j, line in enumerate(rest) if line.strip() == "---"), len(rest))
    return Directive(
        name=name,
        fields=tuple(fields),
        prompt="\n".join(rest[:cut]).strip(),
        explain="\n".join(rest[cut + 1 :]).strip(),
        where=where,
    )


__all__ = [
    "DIRECTIVES",
    "Block",
    "Directive",
    "LessonError",
    "LessonSource",
    "parse_lesson",
    "read_lesson",
]
