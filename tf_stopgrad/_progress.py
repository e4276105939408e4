"""Progress lines of the demos and the benchmark, readable in a terminal and in a log."""

from __future__ import annotations

import sys
from typing import TextIO

LOG_LINES = 4  # whole lines a loop writes to a log: at each quarter, the last at its end


class Progress:
    """``label done/total`` on a stream (stderr by default).

    On a terminal one line is updated in place. In a log (a file or pipe), where carriage
    returns would pile up into one long line, a whole line is written at each quarter of the
    work and when it ends. Use it as a context manager, so that a loop that stops early
    (a converged fit) still ends its line::

        with Progress("EM iteration", max_iter) as progress:
            for iteration in range(1, max_iter + 1):
                ...
                progress(iteration)

    It can also be handed to code that reports ``progress(done, total)`` itself.
    """

    def __init__(self, label: str, total: int = 0, stream: TextIO | None = None) -> None:
        self._label = label
        self._total = total
        self._stream = stream if stream is not None else sys.stderr
        self._in_place = self._stream.isatty()
        self._done = 0
        self._written = -1  # the count of the last line written

    def __call__(self, done: int, total: int | None = None) -> None:
        if total is not None:
            self._total = total
        self._done = done
        if self._in_place:
            self._stream.write(f"\r{self._line()}")
            if done >= self._total:
                self._stream.write("\n")
                self._written = done
        elif done >= self._total or self._quarter(done) != self._quarter(done - 1):
            self._write_line()
        self._stream.flush()

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._written == self._done:
            return
        if self._in_place:
            self._stream.write("\n")
        else:
            self._write_line()
        self._stream.flush()

    def _line(self) -> str:
        return f"{self._label} {self._done}/{self._total}"

    def _write_line(self) -> None:
        self._stream.write(self._line() + "\n")
        self._written = self._done

    def _quarter(self, done: int) -> int:
        return done * LOG_LINES // max(self._total, 1)
