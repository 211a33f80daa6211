"""Typed exceptions a user can cause. The CLI turns each into one line and exit 2."""

from __future__ import annotations


class QortexError(Exception):
    """Base class of every error qortex raises on purpose."""


class DatasetError(QortexError):
    """A questions, corpus or OpenIE file is missing, unreadable or malformed."""


class HomeError(QortexError):
    """The data home is missing, unreadable or not writable."""


class SnapshotError(QortexError):
    """No usable snapshot: none published, or a checksum or array is bad."""


class QueryError(QortexError):
    """A query is empty or its parameters are out of range."""


class ConfigError(QortexError):
    """A configuration value is invalid."""


class RecognitionError(QortexError):
    """The LLM recognition filter failed after its retries (the message never holds the API key)."""


class RecordError(QortexError):
    """A memory write or lookup is invalid: empty or oversized text, a bad time, an unknown,
    forgotten or foreign record id."""
