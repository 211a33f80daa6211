"""Event and ingest times: parsing to ISO 8601 UTC, bounds, epoch arrays and the time window."""

from __future__ import annotations

import datetime as dt
import math

import numpy as np
import pytest

from qortex_core.errors import QueryError
from qortex_core.query.validation import validate_window
from qortex_core.storage import times


def test_parse_time_normalises_to_utc():
    assert times.parse_time("2023-05-08") == "2023-05-08T00:00:00Z"
    assert times.parse_time("2023-05-08T13:56:00+02:00") == "2023-05-08T11:56:00Z"
    assert times.parse_time("2023-05-08T13:56:00Z") == "2023-05-08T13:56:00Z"
    assert times.parse_time("2023-05-08 13:56") == "2023-05-08T13:56:00Z"  # no zone: UTC
    assert times.parse_time(0) == "1970-01-01T00:00:00Z"
    assert times.parse_time(dt.date(2024, 2, 29)) == "2024-02-29T00:00:00Z"
    for bad in ("yesterday", "", "2023-13-01", True, None, [2023]):
        with pytest.raises(ValueError):
            times.parse_time(bad)


def test_until_a_bare_date_keeps_the_whole_day():
    assert times.parse_bound("2023-05-08", upper=True) == "2023-05-08T23:59:59Z"
    assert times.parse_bound("2023-05-08") == "2023-05-08T00:00:00Z"
    assert times.parse_bound("2023-05-08T10:00:00Z", upper=True) == "2023-05-08T10:00:00Z"


def test_epochs_and_window_mask():
    epochs = times.epoch_array(["2023-05-08T00:00:00Z", None, "2023-06-01T12:00:00Z", "junk"])
    assert epochs[0] == dt.datetime(2023, 5, 8, tzinfo=dt.timezone.utc).timestamp()
    assert math.isnan(epochs[1]) and math.isnan(epochs[3])
    assert times.window_mask(epochs) is None
    since = times.window_mask(epochs, since="2023-05-09T00:00:00Z")
    assert since.tolist() == [False, False, True, False]  # no time: never inside a bound
    both = times.window_mask(epochs, "2023-05-01T00:00:00Z", "2023-05-31T23:59:59Z")
    assert both.tolist() == [True, False, False, False]
    assert np.array_equal(
        times.window_mask(epochs, until="2030-01-01T00:00:00Z"), ~np.isnan(epochs)
    )


def test_validate_window_errors_are_query_errors():
    assert validate_window(None, None) == (None, None)
    assert validate_window("2023-05-01", "2023-05-01") == (
        "2023-05-01T00:00:00Z",
        "2023-05-01T23:59:59Z",
    )
    with pytest.raises(QueryError, match="since: 'last week' is not an ISO 8601"):
        validate_window("last week", None)
    with pytest.raises(QueryError, match="is after until"):
        validate_window("2023-06-01", "2023-05-01")


def test_epoch_array_parses_every_form_as_to_epoch_does():
    """The Arrow kernel reads the stored form; any other form (a date, an offset, junk, empty)
    is parsed one at a time, the same as :func:`times.to_epoch` (arrays, chunked or lists)."""
    import pyarrow as pa

    values = ["2023-05-08T13:56:00Z", None, "", "2023-05-08", "2023-05-08T13:56:00+02:00", "x"]
    want = np.array([times.to_epoch(v) for v in values])
    assert np.isnan(want).sum() == 3 and want[3] == times.to_epoch("2023-05-08T00:00:00Z")
    chunked = pa.chunked_array([values[:2], values[2:]], pa.string())
    for given in (values, pa.array(values, pa.string()), chunked):
        assert np.array_equal(times.epoch_array(given), want, equal_nan=True)
