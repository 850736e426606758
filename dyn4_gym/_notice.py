"""Saying what a long wait is: a line on stderr when a call outlasts a few seconds, never for
a quick one (issue 47: the first ``gym.make`` compiled the Numba kernels for 35-60 s without a
word)."""

from __future__ import annotations

import contextlib
import sys
import threading

__all__ = ["SLOW_AFTER", "slow_notice"]

SLOW_AFTER = 3.0  # [s] a wait longer than this is said


_SAID: set = set()  # the messages said in this process


def _say(message: str) -> None:
    if message not in _SAID:
        _SAID.add(message)
        print(message, file=sys.stderr, flush=True)


@contextlib.contextmanager
def slow_notice(message: str, after: float | None = None):
    """Within the block, print ``message`` on stderr if the block is still running ``after``
    seconds (:data:`SLOW_AFTER` unless given) after it began and this process has not said it
    before (several kernels compiling one after another make one line); a quicker block prints
    nothing. A daemon timer thread: nothing waits for it."""
    timer = threading.Timer(SLOW_AFTER if after is None else after, _say, (message,))
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
