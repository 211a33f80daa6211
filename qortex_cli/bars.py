"""Progress of long stages on stderr: on a terminal a bar per stage with its rate and ETA
(tqdm), otherwise the plain lines a log file or a pipe can keep (one every 10% of a stage)."""

from __future__ import annotations

import sys
from typing import TextIO


class StageProgress:
    """A ``progress(stage, done, total)`` callback.

    Args:
        stream: where to write; None: ``sys.stderr`` at each call (so a capture sees it).
        tty: force bars (True) or plain lines (False); None: bars when the stream is a terminal.
    """

    def __init__(self, stream: TextIO | None = None, tty: bool | None = None) -> None:
        self.stream = stream
        self.tty = tty
        self.bars: dict[str, object] = {}  # stage -> its open tqdm bar
        self.last: tuple[str, int] = ("", -1)

    def __call__(self, stage: str, done: int, total: int) -> None:
        stream = self.stream or sys.stderr
        tty = self.tty if self.tty is not None else terminal(stream)
        if tty:
            self._bar(stream, stage, done, total)
        else:
            self._line(stream, stage, done, total)

    def _line(self, stream: TextIO, stage: str, done: int, total: int) -> None:
        pct = int(100 * done / total) if total else 100
        if (stage, pct // 10) == self.last and done < total:
            return
        self.last = (stage, pct // 10)
        print(f"  {stage}: {done}/{total}", file=stream, flush=True)

    def _bar(self, stream: TextIO, stage: str, done: int, total: int) -> None:
        from tqdm import tqdm

        bar = self.bars.get(stage)
        if bar is None or bar.total != total:  # type: ignore[attr-defined]
            self.close(stage)
            bar = tqdm(
                total=total, desc=f"  {stage}", file=stream, unit="item", leave=True,
                dynamic_ncols=True, mininterval=0.2, smoothing=0.1,
            )  # fmt: skip
            self.bars[stage] = bar
        bar.update(max(done - bar.n, 0))  # type: ignore[attr-defined]
        if done >= total:
            self.close(stage)

    def close(self, stage: str | None = None) -> None:
        """Finish the bar of ``stage`` (None: every open bar)."""
        for name in [stage] if stage is not None else list(self.bars):
            bar = self.bars.pop(name, None) if name is not None else None
            if bar is not None:
                bar.close()  # type: ignore[attr-defined]


def terminal(stream: TextIO) -> bool:
    """True when ``stream`` is a terminal."""
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # a closed or stream-like object
        return False
