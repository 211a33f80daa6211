"""Every public result and record type round-trips through JSON: ``T.from_dict(x.to_dict()) == x``.

The instances come from real calls: a query on the toy home, a Memory's writes, history and
feedback on it, graph exploration, export and import, snapshots, prune and doctor. Each type is
checked on every instance of it those calls returned (nested ones included), through
``json.dumps(..., allow_nan=False)`` and back.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import sys
from pathlib import Path

import pytest

import qortex_core
from qortex_core.errors import FormatError
from qortex_core.feedback.events import FeedbackEvent
from qortex_core.jsonable import JsonRecord
from qortex_core.ops.archive import ExportReport, export_home
from qortex_core.ops.archive_import import ImportReport, import_home
from qortex_core.ops.doctor import Check, DoctorConfig, DoctorReport, diagnose
from qortex_core.query import explore_types as ex
from qortex_core.query.results import ConceptHit, PassageHit, QueryResult, Seed
from qortex_core.query.rules import RuleHit
from qortex_core.storage.retention import PruneReport, SnapshotInfo, list_snapshots, prune_snapshots

sys.path.insert(0, str(Path(__file__).parent))
from memory_corpus import corpus, ingest  # noqa: E402

TYPES = [
    QueryResult, PassageHit, ConceptHit, Seed, RuleHit, qortex_core.MemoryRecord,
    qortex_core.Revision, FeedbackEvent, ex.Resolved, ex.Neighbor, ex.Neighborhood,
    ex.PassageRef, ex.PathStep, ex.GraphPath, ex.FactRef, ex.EntityInfo, ExportReport,
    ImportReport, SnapshotInfo, PruneReport, Check, DoctorReport,
]  # fmt: skip


def _walk(value: object):
    """``value`` and every dataclass instance nested in it."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        yield value
        for f in dataclasses.fields(value):
            yield from _walk(getattr(value, f.name))
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _walk(item)


@pytest.fixture(scope="module")
def instances(_toy_home_session, tmp_path_factory, embedder) -> dict[type, list]:
    """Type -> every instance of it that real calls returned."""
    root = tmp_path_factory.mktemp("json")
    home = root / "toy"
    shutil.copytree(_toy_home_session[0], home)
    mem = qortex_core.open(home, embedder=embedder)
    record = mem.remember(
        "Orlan Vesk finished his third symphony in Velmora.",
        time="2026-03-01T09:30:00Z",
        domain="notes",
        metadata={"turn": 3, "tags": ["music"], "score": 0.5},
    )
    updated = mem.update(record.id, "Orlan Vesk finished his fourth symphony in Velmora.")
    result = mem.search("What is the capital of the country where Orlan Vesk was born?",
                        top_k=5, mode="hipporag")  # fmt: skip
    events = mem.feedback(result.query_id, accepted=[result.passages[0].id])
    rules_home = root / "rules"
    ingest(rules_home, corpus(), embedder)  # the offline extractor finds rules in these texts
    rules = qortex_core.open(rules_home, embedder=embedder).search(
        "What should operators never do with the Orion Pump?", top_k=3, mode="hipporag"
    )
    exported = export_home(home, root / "home.jsonl")
    found = [
        result, rules, record, updated, mem.history(record.id), mem.list(), events,
        mem.neighbors("Ostrania", depth=2), mem.path("Orlan Vesk", "Velmora"), mem.entity("Lune"),
        exported, import_home(root / "copy", root / "home.jsonl"), list_snapshots(home),
        prune_snapshots(home, keep=5), diagnose(home, embedder, DoctorConfig(probe=False)),
    ]  # fmt: skip
    by_type: dict[type, list] = {t: [] for t in TYPES}
    for item in _walk(found):
        by_type.setdefault(type(item), []).append(item)
    return by_type


@pytest.mark.parametrize("kind", TYPES, ids=lambda t: t.__name__)
def test_json_round_trip(instances, kind) -> None:
    assert instances[kind], f"no call returned a {kind.__name__}"
    for item in instances[kind]:
        text = json.dumps(item.to_dict(), allow_nan=False)
        assert kind.from_dict(json.loads(text)) == item


def test_every_returned_result_type_is_covered(instances) -> None:
    assert set(instances) == set(TYPES)
    assert all(issubclass(t, JsonRecord) for t in TYPES)


def test_times_are_iso_and_extras_are_written(instances) -> None:
    event = instances[FeedbackEvent][0]
    assert event.to_dict()["ts"] == event.ts.isoformat()
    path = instances[ex.GraphPath][0]
    assert path.to_dict()["length"] == path.length and path.found
    assert instances[DoctorReport][0].to_dict()["healthy"] is True
    record = instances[qortex_core.MemoryRecord][0]
    assert record.to_dict()["metadata"] == {"turn": 3, "tags": ["music"], "score": 0.5}


def test_non_finite_numbers_become_null() -> None:
    hit = ConceptHit("c_1", "Lune", float("nan"))
    text = json.dumps(hit.to_dict(), allow_nan=False)
    assert text == '{"id": "c_1", "name": "Lune", "score": null}'


def test_bad_data_is_one_format_error() -> None:
    with pytest.raises(FormatError, match="missing field 'score'"):
        ConceptHit.from_dict({"id": "c_1", "name": "Lune"})
    with pytest.raises(FormatError, match=r"QueryResult.passages\[0\]: expected an object"):
        QueryResult.from_dict({"query": "q", "mode": "dense", "snapshot": "", "passages": [3]})
    with pytest.raises(FormatError, match="expected an ISO 8601 time"):
        FeedbackEvent.from_dict(dict(EVENT, ts="soon"))


EVENT = {
    "event_id": "e", "query_id": "q_1", "result_id": "p_1", "kind": "accepted",
    "concept_ids": ["c_1"], "ts": "2026-03-01T09:30:00+00:00",
}  # fmt: skip


def test_json_schema_describes_to_dict() -> None:
    schema = QueryResult.json_schema()
    assert schema["type"] == "object" and "passages" in schema["required"]
    assert ex.GraphPath.json_schema()["properties"]["length"] == {"type": "integer"}
