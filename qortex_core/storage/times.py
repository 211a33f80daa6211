"""Event and ingest times: ISO 8601 UTC strings in tables and results, epoch seconds in arrays.

Every passage carries an event time (when what it says happened or was written: an agent
memory's own time, a corpus entry's date field, else its file's modification time) and an
ingest time (when it first entered the chunks table). Both are stored as
``YYYY-MM-DDTHH:MM:SSZ``; a time given without a zone is taken as UTC. Only years 1000-9999
(after conversion to UTC) are times: with four digits, string order is time order, and every
stored time parses back.
"""

from __future__ import annotations

import datetime as dt
from typing import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

DATE_FIELDS = ("time", "date", "timestamp", "created_at")  # corpus JSON fields read as event time
_FORMAT = "%Y-%m-%dT%H:%M:%SZ"
MIN_YEAR, MAX_YEAR = 1000, 9999  # four-digit years, in UTC
RANGE = f"years {MIN_YEAR}-{MAX_YEAR} in UTC"


def iso(moment: dt.datetime) -> str:
    """``moment`` as ISO 8601 UTC (naive: taken as UTC), to the second, with a four-digit year.

    Raises:
        ValueError: the moment lies outside years 1000-9999 once converted to UTC.
    """
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.timezone.utc)
    try:
        utc = moment.astimezone(dt.timezone.utc)
    except OverflowError:  # 0001-01-01T00:00+14:00 is in year 0 in UTC
        raise ValueError(f"{moment.isoformat()} is out of range: {RANGE}") from None
    if not MIN_YEAR <= utc.year <= MAX_YEAR:
        raise ValueError(f"{moment.isoformat()} is out of range: {RANGE}")
    return f"{utc.year:04d}-{utc:%m-%dT%H:%M:%S}Z"


def now_iso() -> str:
    """The current time as ISO 8601 UTC."""
    return iso(dt.datetime.now(dt.timezone.utc))


def from_epoch(seconds: float) -> str:
    """Epoch seconds (a file's mtime) as ISO 8601 UTC.

    Raises:
        ValueError: not finite, or outside years 1000-9999.
    """
    try:
        moment = dt.datetime.fromtimestamp(seconds, dt.timezone.utc)
    except (OverflowError, OSError, ValueError):  # 1e300, NaN, inf: no datetime holds them
        raise ValueError(f"epoch seconds {seconds!r} are out of range: {RANGE}") from None
    return iso(moment)


def parse_time(value: object) -> str:
    """A date or date-time (ISO 8601 text, or epoch seconds) as ISO 8601 UTC.

    ``2023-05-08`` is midnight UTC; ``2023-05-08T13:56:00+02:00`` becomes ``...T11:56:00Z``.

    Raises:
        ValueError: not a date, date-time or number, or outside years 1000-9999 in UTC.
    """
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a time")
    if isinstance(value, (int, float)):
        try:
            return from_epoch(float(value))
        except OverflowError:  # an int past float's range
            raise ValueError(f"epoch seconds are out of range: {RANGE}") from None
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
        moment = dt.datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"{value[:40]!r} is not an ISO 8601 date or date-time") from None
    return iso(moment)


def parse_bound(value: object, upper: bool = False) -> str:
    """A ``since`` (``upper`` False) or ``until`` bound; a bare date as ``until`` means its last
    second (``until="2023-05-08"`` keeps the whole day).

    Raises:
        ValueError: not a date, date-time or number, or outside years 1000-9999 in UTC.
    """
    out = parse_time(value)
    if upper and isinstance(value, str) and len(value.strip()) == 10:
        start = dt.datetime.strptime(out, _FORMAT).replace(tzinfo=dt.timezone.utc)
        return iso(start + dt.timedelta(days=1, seconds=-1))
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


def epoch_array(values: Sequence[str | None] | pa.Array | pa.ChunkedArray) -> np.ndarray:
    """(n,) float64 :func:`to_epoch` of each stored time, NaN where a passage has none: the
    stored form (``YYYY-MM-DDTHH:MM:SSZ``) parsed by one Arrow kernel, any other one at a time."""
    if not isinstance(values, (pa.Array, pa.ChunkedArray)):
        values = pa.array(list(values), pa.string())
    parsed = pc.strptime(values, format=_FORMAT, unit="s", error_is_null=True)
    when = pc.cast(parsed, pa.int64()).to_numpy(zero_copy_only=False).astype(np.float64)
    missing = np.flatnonzero(pc.is_null(parsed).to_numpy(zero_copy_only=False))
    if missing.size:  # none, or another form
        others = values.take(pa.array(missing)).to_pylist()
        when[missing] = np.array([to_epoch(v) for v in others], dtype=np.float64)
    return when


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
