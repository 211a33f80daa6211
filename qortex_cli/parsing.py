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


def mode_name(text: str) -> str:
    """A registered retrieval mode, checked while parsing (before any model loads): an unknown
    one is a usage error naming the closest mode."""
    from qortex_core.errors import QueryError
    from qortex_core.query import modes

    try:
        modes.get(text)
    except QueryError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


mode_name.__name__ = "mode"

_CHOICE = re.compile(r"argument (\S+): invalid choice: '(.*?)' \(choose from (.*)\)$")
_UNKNOWN = re.compile(r"unrecognized arguments: (.*)$")


def _options(parser: argparse.ArgumentParser) -> set[str]:
    """Every option string of ``parser`` and of its subcommands."""
    found: set[str] = set()
    for action in parser._actions:
        found.update(action.option_strings)
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                found |= _options(sub)
    return found


class QortexParser(argparse.ArgumentParser):
    """An ArgumentParser whose ``int``/``float`` options parse strictly and whose usage errors
    print one ``qortex: error:`` line (exit 2) instead of the usage block, with the closest
    command, choice or option when one is a likely typo."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.register("type", int, strict_int)  # ``type=int`` now means strict_int
        self.register("type", float, strict_float)

    def _get_values(self, action: argparse.Action, arg_strings: list[str]):  # noqa: ANN202
        # ``--opt=--``: argparse drops the ``--`` and gives the option an empty list, never
        # calling its type; a single-valued option needs a value
        if action.option_strings and action.nargs is None and arg_strings == ["--"]:
            self.error(f"argument {'/'.join(action.option_strings)}: expected one argument")
        return super()._get_values(action, arg_strings)

    def error(self, message: str) -> NoReturn:
        text = self._suggested(" ".join(message.split()))
        where = "" if self.prog == "qortex" else f"{self.prog}: "
        print(f"qortex: error: {where}{text} (see `{self.prog} --help`)", file=sys.stderr)
        self.exit(2)

    def _suggested(self, text: str) -> str:
        """argparse's message, with "did you mean" for a mistyped choice or option."""
        from qortex_core.errors import did_you_mean

        choice = _CHOICE.match(text)
        if choice:
            what, word, listed = choice.groups()
            choices = re.findall(r"'([^']*)'", listed)
            hint = did_you_mean(word, choices) or f" (one of {', '.join(choices)})"
            if what.endswith("command"):
                return f"unknown command {word!r}{hint}"
            return f"argument {what}: invalid choice {word!r}{hint}"
        unknown = _UNKNOWN.match(text)
        if unknown:
            first = next((w for w in unknown.group(1).split() if w.startswith("--")), "")
            hint = did_you_mean(first.partition("=")[0], _options(self))
            return f"unknown option {first!r}{hint}" if hint else text
        return text


def add_home(p: argparse.ArgumentParser, nested: bool = False) -> None:
    """``--home`` and ``--tenant``; ``nested`` keeps a parent command's values when the subcommand
    omits them."""
    default = argparse.SUPPRESS if nested else None
    p.add_argument("--home", default=default, help="data home (default: $QORTEX_HOME or ~/.qortex)")
    p.add_argument("--tenant", default=default, help="tenant namespace (default: the home itself)")


def add_home_and_json(p: argparse.ArgumentParser, as_json: bool = True) -> None:
    """``--home``, ``--tenant`` and (unless ``as_json`` is False) ``--json`` to print JSON."""
    add_home(p)
    if as_json:
        p.add_argument("--json", action="store_true", help="print JSON")


def home_of(args: argparse.Namespace):
    """The data home ``--home`` and ``--tenant`` name."""
    from qortex_core.storage.tenants import tenant_home

    return tenant_home(args.home, args.tenant)
