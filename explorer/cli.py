"""Command-line entry point: ``explorer <command> ...``.

Each command lives in its own module under ``explorer.pipeline.cli`` and exposes
``register(subparsers)``, which adds a sub-parser whose ``func(args) -> int`` does the work.
Exit codes are a contract other tools rely on: 0 ok, 1 findings (a hazard, a recompile, a
failed run), 2 bad input. Bad input never shows a traceback: :class:`InputError` becomes one
line on stderr.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from typing import Any, Optional, Sequence

from explorer.cli_options import refuse_outputs_that_are_inputs
from explorer.errors import InputError, MissingExtraError, one_line

#: Command modules, in the order ``explorer --help`` lists them.
COMMANDS: tuple[str, ...] = (
    "explorer.pipeline.cli.schedule",
    "explorer.pipeline.cli.check",
    "explorer.pipeline.cli.fix",
    "explorer.compile.cli.probe",
    "explorer.xla.cli.hlo",
    "explorer.pipeline.cli.run",
    "explorer.pipeline.cli.doctor",
    "explorer.xla.cli.run",
    "explorer.read",
    "explorer.lessons.cli",
)

#: The command names each module registers, so that a run imports only its own command's module
#: (``hlo-diff`` need not pay for numpy and the schedule generators). A name missing here still
#: works: the full parser is built. ``tests/test_cli_lazy.py`` checks the table against ``register``.
COMMAND_NAMES: dict[str, str] = {
    "schedule": "explorer.pipeline.cli.schedule",
    "check": "explorer.pipeline.cli.check",
    "fix": "explorer.pipeline.cli.fix",
    "compile-probe": "explorer.compile.cli.probe",
    "hlo-diff": "explorer.xla.cli.hlo",
    "hlo-list": "explorer.xla.cli.hlo",
    "run": "explorer.pipeline.cli.run",
    "doctor": "explorer.pipeline.cli.doctor",
    "xla-run": "explorer.xla.cli.run",
    "read": "explorer.read",
    "lesson": "explorer.lessons.cli",
}


def _terminal_width() -> int:
    """What ``shutil.get_terminal_size().columns`` says, less the 2 argparse takes off: the
    ``COLUMNS`` variable, else the terminal of standard output, else 80."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 0
    return (columns if columns > 0 else 80) - 2


class _HelpFormatter(argparse.HelpFormatter):
    """argparse's formatter, handed the width: asked for none, it imports :mod:`shutil` (and
    with it ``bz2`` and ``lzma``) while the parser is built, about 2.5 ms of every command's
    start (``hlo-diff`` takes 0.17 s in all), to learn the same number."""

    def __init__(
        self,
        prog: str,
        indent_increment: int = 2,
        max_help_position: int = 24,
        width: int | None = None,
    ) -> None:
        width = _terminal_width() if width is None else width
        super().__init__(prog, indent_increment, max_help_position, width)


class _Parser(argparse.ArgumentParser):
    """argparse exits 2 on bad usage already; keep its message to one line, like every other bad input.

    The usage block argparse prints first is left out: one line names the option and the
    constraint, and points at ``--help``.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # no prefixes of long options: `doctor --stage 1` was taken for `--stages 1`, and the
        # refusal then spoke of a plan of 1 stage the user never asked for
        kwargs.setdefault("allow_abbrev", False)
        kwargs.setdefault("formatter_class", _HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str):
        if message.endswith("expected one argument"):
            message += _dash_value_hint(message)
        self.exit(2, f"{self.prog}: error: {one_line(message)} (see {self.prog} --help)\n")


#: The words being parsed (set by :func:`main`): argparse's errors do not carry them.
_PARSING: list[str] = []


def _dash_value_hint(message: str) -> str:
    """What argparse does not say when an option's value starts with ``-`` (``--sweep -1:1``,
    ``--stages -4``): it took the value for another option. Name the value and the way to pass it."""
    option = message.removeprefix("argument ").split(":")[0].split("/")[-1].strip()
    argv = _PARSING
    at = next((i for i, a in enumerate(argv) if a == option), None)
    if at is None or at + 1 >= len(argv) or not argv[at + 1].startswith("-"):
        return ""
    value = argv[at + 1]
    return (
        f"; {value!r} starts with '-' and was read as an option: give {option} a value that "
        f"does not (sizes and counts start at 0 or 1), or write {option}={value} to pass it as it is"
    )


def build_parser(modules: Sequence[str] = COMMANDS) -> argparse.ArgumentParser:
    """The parser with the commands of ``modules`` (all of them by default)."""
    parser = _Parser(prog="explorer", description=__doc__.splitlines()[0])
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in modules:
        importlib.import_module(name).register(subparsers)
    return parser


def _parser_for(argv: Sequence[str]) -> argparse.ArgumentParser:
    """Only the named command's module when the first word is a known command, else all."""
    if argv and argv[0] in COMMAND_NAMES:
        return build_parser((COMMAND_NAMES[argv[0]],))
    return build_parser()


def _command_words(args: argparse.Namespace) -> str:
    """The command as typed, its action included (``lesson build``), as argparse's own refusals
    name it: a refusal of ``--only`` once said ``explorer lesson:`` and argparse's of ``--out``
    ``explorer lesson build:``."""
    return " ".join(w for w in (args.command, getattr(args, "action", None)) if w)


def main(argv: Sequence[str] | None = None, exit_now: bool = False) -> int:
    """Run one command and return its exit code (0 ok, 1 findings, 2 bad input).

    ``exit_now`` (the program's own entry points, never a caller in process) ends the process
    as soon as a command that holds nothing at its end has printed its answer: see
    :func:`_exit_without_teardown`.
    """
    given = sys.argv[1:] if argv is None else list(argv)
    _PARSING[:] = given  # for the refusal's hint (_dash_value_hint)
    parser = _parser_for(given)
    args = parser.parse_args(argv)
    args.argv = list(
        sys.argv[1:] if argv is None else argv
    )  # a command may re-run itself in a child
    if exit_now and not getattr(args, "leaves_nothing_open", False):
        unwind_on_termination()  # a command that holds nothing (hlo-diff) just ends, unimported
    given_output = sys.stdout
    output = _WatchedOutput(given_output) if given_output is not None else None
    try:
        refuse_outputs_that_are_inputs(args)
        _refuse_closed_output()
        sys.stdout = output
        code = int(args.func(args))
        if output is not None:  # a full disk under a redirect is said here, not at exit
            output.flush()
        sys.stdout = given_output
        if exit_now and getattr(args, "leaves_nothing_open", False):
            _exit_without_teardown(code)
        return code
    except (InputError, MissingExtraError) as exc:
        print(f"explorer {_command_words(args)}: error: {one_line(str(exc))}", file=sys.stderr)
        return 2
    except Terminated as exc:
        print(f"explorer {_command_words(args)}: ended by {exc.name}", file=sys.stderr)
        return 128 + exc.signum
    except KeyboardInterrupt:
        print(f"explorer {_command_words(args)}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `explorer ... | head`: the reader left before the verdict was out
        # Never 0: that would read as "clean" whatever the verdict was. 141 is what a program
        # killed by SIGPIPE gives its shell (128 + 13), as `cat big | head` does.
        try:
            sys.stdout = open(os.devnull, "w")  # the interpreter's own flush at exit must not fail
        except OSError:  # pragma: no cover
            pass
        return 141
    except OSError as exc:
        if output is None or output.failed is not exc:
            raise
        print(
            f"explorer {_command_words(args)}: error: the answer cannot be written to standard "
            f"output ({exc.strerror or exc}): give a file or pipe that takes it",
            file=sys.stderr,
        )
        if exit_now:  # the program's: the interpreter's own flush at exit must not fail
            sys.stdout = open(os.devnull, "w")
        return 2
    finally:
        if sys.stdout is output:  # in-process callers get their own stream back
            sys.stdout = given_output


def _refuse_closed_output() -> None:
    """Standard output closed (``>&-``): every answer would go nowhere, and a command that
    writes its document in one piece raised a traceback. Exit 2, before any work."""
    if sys.stdout is None:
        raise InputError(
            "standard output is closed (>&-): the answer would go nowhere; send it to a file, a "
            "pipe or /dev/null"
        )


class _WatchedOutput:
    """Standard output, with the OSError its writes raise kept (:attr:`failed`): a full disk or a
    device that takes nothing under a redirect (``> /dev/full``) is then said in one line, exit 2,
    where a traceback was, and no other OSError of a command is taken for it."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream
        self.failed: Optional[OSError] = None

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except OSError as exc:
            self.failed = exc
            raise

    def flush(self) -> None:
        try:
            self._stream.flush()
        except OSError as exc:
            self.failed = exc
            raise

    def __getattr__(self, name: str) -> Any:  # isatty, fileno, encoding...: the stream's own
        return getattr(self._stream, name)


def _exit_without_teardown(code: int) -> None:
    """End the process with ``code`` once its output is out, without the interpreter's teardown.

    A command that marks itself ``leaves_nothing_open`` (``hlo-diff``, ``hlo-list``: they read
    files and print) has no children, threads, temporary files or exit handlers to wait for, and
    the teardown of its process (every module and the last garbage collection over a 35,000-
    instruction diff's records) took about 10 ms of a 0.2 s ``hlo-diff``. A reader that left
    early (``| head``) gives 141, as in :func:`main`.
    """
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BrokenPipeError:
        code = 141
    except OSError:  # pragma: no cover - a full disk under a redirect: let the usual exit say so
        return
    os._exit(code)


class Terminated(KeyboardInterrupt):
    """``SIGTERM`` or ``SIGHUP`` (``kill``, ``timeout``, a closed terminal), unwinding as
    Ctrl-C does: every command's ``finally`` ends the processes it started. Without it a
    killed ``explorer run`` left its ranks running (each leads its own process group)."""

    def __init__(self, signum: int, name: str) -> None:
        super().__init__(name)
        self.signum, self.name = signum, name


def _end_as_ctrl_c(signum: int, _frame: Any) -> None:
    import signal

    raise Terminated(signum, signal.Signals(signum).name)


def unwind_on_termination() -> None:
    """``SIGTERM`` and ``SIGHUP`` unwind the program as Ctrl-C does (:class:`Terminated`).

    One ignored on purpose (``nohup``) stays so. Any other disposition is replaced: the program
    owns its process, and a handler put there before it (a start-up hook that only logs, then
    dies of the signal) once made a terminated ``explorer run`` die of it too, exit -15, its
    folder without a word of how its ranks ended."""
    import signal

    for signum in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(signum) is not signal.SIG_IGN:
            signal.signal(signum, _end_as_ctrl_c)


def program() -> int:
    """The ``explorer`` program (its console script and ``python -m explorer``)."""
    return main(exit_now=True)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(program())

__all__ = ["COMMANDS", "build_parser", "main", "program"]
