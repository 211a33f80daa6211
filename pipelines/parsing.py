"""The CLI's argument parser: numbers parsed once by full match, usage errors on one line.

``int("٣")`` is 3 and ``int("1_0")`` is 10, while ``"²".isdigit()`` is true and ``int("²")``
fails: Python's own parsing accepts more than a user means and disagrees with itself. Every
``type=int`` / ``type=float`` option of a :class:`QortexParser` (and its subcommands) takes
ASCII digits only, checked by one full match, and a bad value is one line, exit 2.
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from typing import Callable, NoReturn

_INT = re.compile(r"-?[0-9]{1,18}")
_FLOAT = re.compile(r"-?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]{1,3})?")


def strict_int(text: str) -> int:
    """An integer written in ASCII digits (an optional leading ``-``), nothing else.

    Raises:
        ValueError: anything else (spaces, ``_``, ``+``, non-ASCII digits, more than 18 digits).
    """
    if not isinstance(text, str) or not _INT.fullmatch(text):
        raise ValueError(text)
    return int(text)


def strict_float(text: str) -> float:
    """A finite decimal number in ASCII (``1``, ``-0.5``, ``1e-3``); no ``nan``, ``inf`` or ``_``.

    Raises:
        ValueError: anything else.
    """
    if not isinstance(text, str) or not _FLOAT.fullmatch(text):
        raise ValueError(text)
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(text)
    return value


strict_int.__name__ = "int"  # argparse names the type in its message: "invalid int value"
strict_float.__name__ = "float"


def csv_of(kind: Callable[[str], object], name: str) -> Callable[[str], tuple]:
    """A comma-separated list of ``kind`` (empty items ignored) as one argparse type."""

    def parse(text: str) -> tuple:
        return tuple(kind(x.strip()) for x in text.split(",") if x.strip())

    parse.__name__ = name
    return parse


class QortexParser(argparse.ArgumentParser):
    """An ArgumentParser whose ``int``/``float`` options parse strictly and whose usage errors
    print one ``qortex: error:`` line (exit 2) instead of the usage block."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.register("type", int, strict_int)  # ``type=int`` now means strict_int
        self.register("type", float, strict_float)

    def error(self, message: str) -> NoReturn:
        text = " ".join(message.split())
        print(f"qortex: error: {self.prog}: {text} (see `{self.prog} --help`)", file=sys.stderr)
        self.exit(2)
