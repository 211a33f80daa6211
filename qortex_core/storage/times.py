"""Event and ingest times: ISO 8601 UTC strings in tables and results, epoch seconds in arrays.

Every passage carries an event time (when what it says happened or was written: an agent
memory's own time, a corpus entry's date field, else its file's modification time) and an
ingest time (when it first entered the chunks table). Both are stored as
``YYYY-MM-DDTHH:MM:SSZ``; a time given without a zone is taken as UTC.
"""

from __future__ import annotations

import datetime as dt
from typing import Sequence

import numpy as np

DATE_FIELDS = ("time", "date", "timestamp", "created_at")  # corpus JSON fields read as event time
_FORMAT = "%Y-%m-%dT%H:%M:%SZ"


def iso(moment: dt.datetime) -> str:
    """``moment`` as ISO 8601 UTC (naive: taken as UTC), to the second."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.timezone.utc)
    return moment.astimezone(dt.timezone.utc).strftime(_FORMAT)


def now_iso() -> str:
    """The current time as ISO 8601 UTC."""
    return iso(dt.datetime.now(dt.timezone.utc))


def from_epoch(seconds: float) -> str:
    """Epoch seconds (a file's mtime) as ISO 8601 UTC."""
    return iso(dt.datetime.fromtimestamp(seconds, dt.timezone.utc))


def parse_time(value: object) -> str:
    """A date or date-time (ISO 8601 text, or epoch seconds) as ISO 8601 UTC.

    ``2023-05-08`` is midnight UTC; ``2023-05-08T13:56:00+02:00`` becomes ``...T11:56:00Z``.

    Raises:
        ValueError: not a date, date-time or number.
    """
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a time")
    if isinstance(value, (int, float)):
        return from_epoch(float(value))
    if isinstance(value, dt.datetime):
        return iso(value)
    if isinstance(value, dt.date):
        return iso(dt.datetime(value.year, value.month, value.day))
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{value!r} is not a time")
    text = value.strip()
    if text[-1:] in ("z", "Z"):
        text = text[:-1] + "+00:00"
    try:
        return iso(dt.datetime.fromisoformat(text))
    except ValueError:
        raise ValueError(f"{value!r} is not an ISO 8601 date or date-time") from None


def parse_bound(value: object, upper: bool = False) -> str:
    """A ``since`` (``upper`` False) or ``until`` bound; a bare date as ``until`` means its last
    second (``until="2023-05-08"`` keeps the whole day).

    Raises:
        ValueError: not a date, date-time or number.
    """
    out = parse_time(value)
    if upper and isinstance(value, str) and len(value.strip()) == 10:
        end = dt.datetime.strptime(out, _FORMAT) + dt.timedelta(days=1, seconds=-1)
        return iso(end)
    return out


def to_epoch(value: str | None) -> float:
    """Epoch seconds of a stored ISO time (NaN for none or an unreadable one)."""
    if not value:
        return float("nan")
    try:
        return dt.datetime.strptime(value, _FORMAT).replace(tzinfo=dt.timezone.utc).timestamp()
    except ValueError:
        try:
            return dt.datetime.fromisoformat(parse_time(value)[:-1] + "+00:00").timestamp()
        except ValueError:
            return float("nan")


def epoch_array(values: Sequence[str | None]) -> np.ndarray:
    """(n,) float64 epoch seconds of stored times, NaN where a passage has none."""
    return np.array([to_epoch(v) for v in values], dtype=np.float64)


def window_mask(
    epochs: np.ndarray, since: str | None = None, until: str | None = None
) -> np.ndarray | None:
    """(n,) True where ``since <= time <= until`` (ISO bounds, inclusive); None when unbounded.

    A passage without a time never passes a bound.
    """
    if since is None and until is None:
        return None
    mask = np.isfinite(epochs)
    if since is not None:
        mask &= epochs >= to_epoch(since)
    if until is not None:
        mask &= epochs <= to_epoch(until)
    return mask
