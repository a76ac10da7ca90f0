"""What is this artifact? The record each product's detector is, and the search over an ordered table.

A :class:`Detector` is a cheap look at a path (names, a few kilobytes of content; never a
whole file) that says whether the path is that kind and why. Products define their
detectors beside their readers of records; the ``explorer read`` door (:mod:`explorer.read`)
holds them in one ordered tuple with the command that answers for each, so the order is
written once, where every kind is in view, and nothing registers itself by being imported.

Pure: no torch, no reading of whole files.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional, Sequence

from explorer.errors import InputError, excerpt


@dataclass(frozen=True)
class Detector:
    """``recognise(path)`` returns why ``path`` is this kind (None: it is not).

    ``unreadable(path)``, asked only when no detector recognised the path, says why it looks
    like this kind yet is not one (a file named like the kind's whose content is not): a
    sentence naming that file and what to change beats the list of every kind.
    """

    kind: str
    what: str
    recognise: Callable[[Path], Optional[str]]
    unreadable: Optional[Callable[[Path], Optional[str]]] = None


@dataclass(frozen=True)
class Detected:
    """The first detector of the table that recognised a path, and why."""

    kind: str
    why: str


def first_recognised(path: Path, detectors: Sequence[Detector]) -> Detected:
    """The first of ``detectors`` that recognises ``path``, or an InputError naming every kind."""
    if not path.exists():
        raise InputError(
            f"{excerpt(str(path))} does not exist: give a file or folder a job left behind"
        )
    if not (path.is_file() or path.is_dir()):
        raise InputError(
            f"{excerpt(str(path))} is neither a regular file nor a folder (a device, a pipe or a "
            "socket): give a file or folder a job left behind"
        )
    for d in detectors:
        why = d.recognise(path)
        if why:
            return Detected(d.kind, why)
    for d in detectors:
        why = d.unreadable(path) if d.unreadable is not None else None
        if why:
            raise InputError(why)
    raise InputError(not_an_artifact(path, detectors))


def not_an_artifact(path: Path, detectors: Sequence[Detector]) -> str:
    """The refusal of a path no detector recognises: the kinds by name only, then what to do.

    Each kind's description made it over a thousand characters, cut at the CLI's one-line limit
    before the instruction; ``explorer read --help`` describes them instead.
    """
    kinds = ", ".join(d.kind for d in detectors)
    return (
        f"{excerpt(str(path))} is not an artifact the explorer reads ({kinds}): give a file or "
        "folder a job left behind; explorer read --help says what each kind holds"
    )


__all__ = ["Detector", "Detected", "first_recognised", "not_an_artifact"]
