"""Reading and writing the files a user names, with the checks that keep the CLI's contract.

Every path a user gives is checked before anything is read or computed: a FIFO or a device
(``/dev/zero``) would block or never end, a file larger than the limit would fill memory,
Latin-1 bytes or a corrupt gzip stream would surface as a decoder's exception, and an output
path into a missing folder would be found only after the work was done. Each problem is one
:class:`~explorer.errors.InputError` that names the path, the limit and what to change.

Pure standard library, so the pure layers (``hlo``, ``schedules``) may use it.
"""

from __future__ import annotations

import errno
import json
import os
import stat
import zlib
from typing import TYPE_CHECKING, Any, Callable, Optional

if TYPE_CHECKING:
    pass  # imported where a .gz file is read: a plain file's command need not load it

from explorer.errors import InputError, excerpt

#: Largest text file read into memory (HLO dumps of a big model are tens of MB).
MAX_TEXT_BYTES = 512 * 2**20
#: Largest JSON document (configs, run specs; a run spec holds a whole schedule).
MAX_JSON_BYTES = 256 * 2**20
#: Deepest nesting accepted in a JSON document (configs are a few levels deep).
MAX_JSON_DEPTH = 64


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe), which would block until something writes to it"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device, which may never end"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def check_input_file(path: str, what: str, limit: int = MAX_TEXT_BYTES) -> int:
    """The size of ``path`` when it is a regular file within ``limit`` bytes; else an InputError."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise InputError(f"{_at(what, path)}: no such file") from None
    except (OSError, ValueError) as exc:
        raise InputError(f"{_at(what, path)}: cannot be read ({_reason(exc)})") from None
    if not stat.S_ISREG(st.st_mode):
        raise InputError(f"{_at(what, path)} is {_kind(st.st_mode)}: give a regular file")
    if st.st_size > limit:
        raise InputError(
            f"{_at(what, path)} is {st.st_size / 2**20:,.0f} MiB, more than the "
            f"{limit / 2**20:,.0f} MiB limit: it is read into memory whole; split it or pick what you need"
        )
    return st.st_size


def _read_capped(
    read: Callable[[int], bytes], limit: int, first: int = 1 << 20
) -> tuple[bytes, bool]:
    """At most ``limit + 1`` bytes of ``fh``, read in pieces, and whether a compressed stream
    ended before its end marker (what came before it is kept).

    ``read(n)`` sets aside n bytes before it reads: one ``read(limit + 1)`` claimed 512 MiB
    for an empty file. ``first`` is the first piece (a plain file's size, and one more byte to
    see that it grew since ``stat``).
    """
    pieces, total, ask = [], 0, min(first, limit + 1)
    while total <= limit:
        try:
            piece = read(ask)
        except EOFError:  # gzip: the stream ends early
            return b"".join(pieces), True
        if not piece:
            break
        pieces.append(piece)
        total += len(piece)
        ask = min(1 << 20, limit + 1 - total)
    return b"".join(pieces), False


def read_bytes(path: str, what: str, limit: int = MAX_TEXT_BYTES) -> bytes:
    """The bytes of a regular file, decompressed when ``path`` ends with ``.gz`` (both capped at ``limit``)."""
    if path.endswith(".gz"):
        data, cut = read_cut_gzip(path, what, limit)
        if cut:
            raise InputError(
                f"{_at(what, path)}: cannot be read (its gzip stream ends before its end "
                "marker); is it a complete gzip file?"
            )
        return data
    size = check_input_file(path, what, limit)
    try:
        with open(path, "rb") as fh:
            return _read_capped(fh.read, limit, first=size + 1)[0]
    except InputError:
        raise
    except OSError as exc:
        raise InputError(f"{_at(what, path)}: cannot be read ({_reason(exc)})") from None


def read_cut_gzip(path: str, what: str, limit: int) -> tuple[bytes, bool]:
    """A gzipped log decompressed as far as its stream goes (capped at ``limit``), and whether
    it ended before its end-of-stream marker: a job stopped while it wrote its gzipped log left
    a cut one, read as a cut plain log is (the complete lines are its record). A stream that is
    damaged rather than short is one InputError, as :func:`read_bytes` says it."""
    import gzip

    check_input_file(path, what, limit)
    try:
        with gzip.open(path, "rb") as fh:
            # its read(n) gathers n bytes and loses them all when the stream ends early;
            # read1 gives what one step decompressed, so every piece before the end is kept
            data, cut = _read_capped(fh.read1, limit)
    except (OSError, zlib.error) as exc:
        raise InputError(
            f"{_at(what, path)}: cannot be read ({_reason(exc)}); is it a complete gzip file?"
        ) from None
    if len(data) > limit:
        raise InputError(
            f"{_at(what, path)} decompresses to more than the {limit / 2**20:,.0f} MiB "
            "limit: it is read into memory whole; split it or pick what you need"
        )
    return data, cut


def read_text(path: str, what: str, limit: int = MAX_TEXT_BYTES) -> str:
    """The UTF-8 text of a regular file (``.gz`` decompressed); other encodings are named, not guessed."""
    data = read_bytes(path, what, limit)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise InputError(
            f"{_at(what, path)} is not UTF-8 text (byte 0x{data[exc.start]:02x} at line {line}, "
            f"offset {exc.start}): save it as UTF-8"
        ) from None


def _no_constant(name: str) -> Any:
    raise ValueError(
        f"{name} is not a JSON number (JSON has no NaN or Infinity): write a finite number"
    )


def loads_json(text: str, what: str, max_depth: Optional[int] = MAX_JSON_DEPTH) -> Any:
    """Strict JSON: no NaN/Infinity, at most ``max_depth`` levels; errors say where.

    ``max_depth=None`` skips the walk that counts levels (a third of the time of reading a
    profiler trace) where the reader takes fixed paths into the document and never recurses
    into it; the parser's own recursion limit still refuses absurd nesting."""
    levels = f"more than {max_depth} levels" if max_depth is not None else "too many levels"
    too_deep = (
        f"{what} nests {levels} deep: a configuration, run spec or trace is a few levels deep; "
        "check the file"
    )
    try:
        value = json.loads(text, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        raise InputError(
            f"{what} is not JSON (line {exc.lineno} column {exc.colno}: {exc.msg})"
        ) from None
    except RecursionError:
        raise InputError(too_deep) from None
    except ValueError as exc:
        raise InputError(f"{what}: {exc}") from None
    if max_depth is not None and _depth_exceeds(value, max_depth):
        raise InputError(too_deep)
    return value


def read_json(path: str, what: str, limit: int = MAX_JSON_BYTES) -> Any:
    """A JSON document from a regular UTF-8 file (see :func:`read_text` and :func:`loads_json`)."""
    return loads_json(read_text(path, what, limit), f"{_at(what, path)}")


def _depth_exceeds(value: Any, max_depth: int) -> bool:
    """Whether ``value`` nests deeper than ``max_depth``, without recursion."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list)):
            if depth > max_depth:
                return True
            children = item.values() if isinstance(item, dict) else item
            stack.extend((c, depth + 1) for c in children if isinstance(c, (dict, list)))
    return False


#: Kernel file systems: their files block (``/proc/kmsg``), never end (``/dev/zero``) or number
#: in the hundreds of thousands; no job writes its records there.
_KERNEL_TREES = ("/proc", "/sys", "/dev")
#: Entries walked under a folder before it is taken for something else than a job's folder.
MAX_FOLDER_ENTRIES = 200_000


def check_plain_files(path: str, what: str) -> None:
    """Everything a reader may open under the folder ``path`` is a plain file (symbolic links
    followed): a FIFO blocked ``explorer read`` for ever, and a link to ``/dev/zero`` named like
    an XLA dump filled the memory until the kernel killed the reader. One InputError instead,
    naming the entry, before any reader opens anything."""
    real = os.path.realpath(path)
    if not os.path.isdir(real):
        return  # a path given itself is the readers' to check (each names what it expects)
    for tree in _KERNEL_TREES:
        shared_memory = real == "/dev/shm" or real.startswith("/dev/shm/")  # a tmpfs: files
        if (real == tree or real.startswith(tree + "/")) and not shared_memory:
            raise InputError(
                f"{_at(what, path)} is in {tree}, a kernel file system, not a folder a job "
                "wrote: give the job's own folder or file"
            )
    if real == "/":  # it holds /proc: a walk met a kernel FIFO there and blamed the folder
        raise InputError(
            f"{_at(what, path)} is the root of the file system, not a folder a job wrote: give "
            "the job's own folder or file"
        )
    seen = 0
    for folder, _dirs, files in os.walk(real):  # links to folders are not followed
        for name in files:
            seen += 1
            if seen > MAX_FOLDER_ENTRIES:
                raise InputError(
                    f"{_at(what, path)} holds more than {MAX_FOLDER_ENTRIES:,} files: give the "
                    "job's own folder"
                )
            _plain_file(os.path.join(folder, name), what)


def _plain_file(path: str, what: str) -> None:
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return  # a broken link or a file gone meanwhile: the readers say what they miss
    if not stat.S_ISREG(mode):
        raise InputError(
            f"{_at(what, path)} is {_kind(mode)}, not a file: remove it from the folder, or give "
            "a folder of the job's own files"
        )


def check_path_given(path: str, what: str, give: str) -> None:
    """Refuse an empty path, which ``Path('')`` and ``os.path`` would take as the current folder.

    ``give`` says what to give instead ("a file name", "a folder")."""
    if not path:
        raise InputError(f"{what + ': ' if what else ''}the path is empty; give {give}")


def check_output_file(path: str, what: str) -> None:
    """Refuse, before any work, an output file that cannot be written: a folder, a missing folder, a device."""
    check_path_given(path, what, "a file name")
    parent = os.path.dirname(os.path.abspath(path))
    try:
        st = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        st = None  # said below: which of its folders is missing or a file
    except (OSError, ValueError) as exc:
        raise InputError(
            f"{_at(what, path)}: cannot be written ({_reason(exc)}); give another file"
        ) from None
    if st is not None:
        if stat.S_ISDIR(st.st_mode):
            raise InputError(f"{_at(what, path)} is a directory: give a file name inside it")
        if os.path.realpath(path).startswith(("/proc/", "/sys/")) or not os.access(path, os.W_OK):
            raise InputError(f"{_at(what, path)} is not writable; give another file")
        if stat.S_ISSOCK(st.st_mode):
            raise InputError(
                f"{_at(what, path)} is a socket, not a file to write: give a file name"
            )
        return  # a file to replace, or a device or pipe the user chose (/dev/null, >(gzip > x.gz))
    if not os.path.isdir(parent):
        if os.path.exists(parent):
            raise InputError(
                f"{_at(what, path)}: {excerpt(parent)} is a file, not a directory; give a path "
                "in a folder"
            )
        raise InputError(
            f"{_at(what, path)}: the folder {excerpt(parent)} does not exist; create it first or "
            "give another path"
        )
    if not os.access(parent, os.W_OK):
        raise InputError(
            f"{_at(what, path)}: the folder {excerpt(parent)} is not writable; give a file in "
            "another folder"
        )
    _try_new_file(path, what)


def _try_new_file(path: str, what: str) -> None:
    """Create ``path`` and remove it again: the only honest test that it can be written.

    A folder can look writable and still refuse a new file (``/proc`` and ``/sys`` for root, a
    read-only mount, a full quota); asked only at the end, the user lost the work before it.
    """
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        return  # it appeared meanwhile: written (or refused) when the work is done
    except (OSError, ValueError) as exc:
        raise InputError(
            f"{_at(what, path)}: cannot be written ({_reason(exc)}); give a file in a folder "
            "you can write"
        ) from None
    os.close(fd)
    os.unlink(path)


def write_text(path: str, text: str, what: str) -> None:
    """Write ``text`` to ``path`` (checked first); a full disk, an I/O error or a FIFO nobody reads is an InputError."""
    check_output_file(path, what)
    try:
        if stat.S_ISFIFO(os.stat(path).st_mode):
            _write_fifo(path, text, what)
            return
    except FileNotFoundError:
        pass
    except OSError as exc:
        raise InputError(f"{_at(what, path)}: cannot be written ({_reason(exc)})") from None
    try:
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text)
    except OSError as exc:
        raise InputError(f"{_at(what, path)}: cannot be written ({_reason(exc)})") from None


def _write_fifo(path: str, text: str, what: str) -> None:
    """A named pipe: refuse at once when nothing reads it (a plain open would wait forever)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
    except OSError as exc:
        if exc.errno == errno.ENXIO:
            raise InputError(
                f"{_at(what, path)} is a FIFO that no process reads: start the reader first, or give "
                "a file"
            ) from None
        raise InputError(f"{_at(what, path)}: cannot be written ({_reason(exc)})") from None
    os.set_blocking(fd, True)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
    except OSError as exc:
        raise InputError(f"{_at(what, path)}: cannot be written ({_reason(exc)})") from None


def check_output_dir(path: str, what: str) -> None:
    """A folder to create or reuse, refused before any work when it cannot hold a new file.

    Refused: an empty path, a file in its place or among its parents, and a folder that cannot
    be created or written (``/proc/x``, ``/sys/x``, a read-only mount). Every command that
    writes an output folder takes its argument through here, so each says it in one line.
    """
    check_path_given(path, what, "a folder")
    probe = os.path.abspath(path)
    if os.path.exists(probe) and not os.path.isdir(probe):
        raise InputError(
            f"{_at(what, path)} is a file, not a folder: give a folder (it is created if missing)"
        )
    while not os.path.exists(probe):
        probe = os.path.dirname(probe)
    if not os.path.isdir(probe):
        raise InputError(
            f"{_at(what, path)}: {excerpt(probe)} is a file, so the folder cannot be created; "
            "give a folder elsewhere"
        )
    if not os.access(probe, os.W_OK):
        raise InputError(
            f"{_at(what, path)}: {excerpt(probe)} is not writable; give another folder"
        )
    _try_folder(path, what)


def _try_folder(path: str, what: str) -> None:
    """Create the missing folders of ``path`` and one file in it, then remove what was made.

    Looking is not enough: root sees ``/proc`` as writable, yet ``mkdir /proc/x`` fails with
    "No such file or directory" and ``/sys/x`` with "Operation not permitted"; found by the
    run's own ``mkdir``, that was a traceback after the command had started.
    """
    target = os.path.abspath(path)
    missing = []
    while not os.path.exists(target):
        missing.append(target)
        target = os.path.dirname(target)
    made: list[str] = []
    try:
        for folder in reversed(missing):
            os.mkdir(folder)
            made.append(folder)
        import tempfile  # here: only an output folder needs it, and it loads random and shutil

        fd, name = tempfile.mkstemp(prefix=".explorer-probe-", dir=os.path.abspath(path))
        os.close(fd)
        os.unlink(name)
    except (OSError, ValueError) as exc:
        verb = "be created" if missing else "hold a new file"
        raise InputError(
            f"{_at(what, path)}: the folder cannot {verb} ({_reason(exc)}); give a folder you "
            "can write (it is created if missing)"
        ) from None
    finally:
        for folder in reversed(made):
            try:
                os.rmdir(folder)
            except OSError:
                pass


def _at(what: str, path: str) -> str:
    """``--out '/x/y'`` (or just ``'/x/y'`` when the option is already named, as argparse does)."""
    return f"{what} {excerpt(path)}" if what else excerpt(path)


def _reason(exc: BaseException) -> str:
    """``strerror`` for OS errors, else the exception's own words, short."""
    text = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
    return text if len(text) <= 120 else text[:117] + "..."


__all__ = [
    "MAX_TEXT_BYTES",
    "MAX_JSON_BYTES",
    "MAX_JSON_DEPTH",
    "check_input_file",
    "read_bytes",
    "read_text",
    "loads_json",
    "read_json",
    "check_path_given",
    "check_output_file",
    "write_text",
    "check_output_dir",
]
