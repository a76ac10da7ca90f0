"""``kill`` and a closed terminal unwind the ``explorer`` program as Ctrl-C does, whatever was
there before it, except a signal ignored on purpose (``nohup``)."""

from __future__ import annotations

import os
import signal
from typing import Iterator

import pytest

from explorer.cli import Terminated, unwind_on_termination

SIGNALS = (signal.SIGTERM, signal.SIGHUP)


@pytest.fixture
def dispositions() -> Iterator[None]:
    """This process's handlers of both signals, put back after the test."""
    before = {s: signal.getsignal(s) for s in SIGNALS}
    yield
    for s, handler in before.items():
        signal.signal(s, handler)


def _logs_then_dies(signum: int, _frame: object) -> None:  # what a start-up hook may install
    raise AssertionError("the earlier handler ran")


@pytest.mark.parametrize("earlier", [signal.SIG_DFL, _logs_then_dies], ids=["default", "a-hook"])
@pytest.mark.parametrize("signum", SIGNALS, ids=["SIGTERM", "SIGHUP"])
def test_a_signal_unwinds_as_ctrl_c_does(dispositions, earlier, signum) -> None:
    """A hook's handler was once kept: a terminated run died of the signal (exit -15), and its
    folder never said how its ranks ended."""
    signal.signal(signum, earlier)
    unwind_on_termination()
    with pytest.raises(Terminated) as raised:
        os.kill(os.getpid(), signum)
    assert (raised.value.signum, raised.value.name) == (signum, signal.Signals(signum).name)
    assert isinstance(raised.value, KeyboardInterrupt)  # every command's Ctrl-C path unwinds it


@pytest.mark.parametrize("signum", SIGNALS, ids=["SIGTERM", "SIGHUP"])
def test_a_signal_ignored_on_purpose_stays_ignored(dispositions, signum) -> None:
    signal.signal(signum, signal.SIG_IGN)
    unwind_on_termination()
    assert signal.getsignal(signum) is signal.SIG_IGN
    os.kill(os.getpid(), signum)  # nohup's promise: nothing happens
