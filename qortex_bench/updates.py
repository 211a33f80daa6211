"""The updates benchmark: does memory answer what is true now, or at the date asked?

``qortex eval --updates FILE [--home DIR] [--json OUT]``: the file's memories are written with
:meth:`~qortex_core.agent.api.Memory.remember` in file order (each with its event time), every
question is asked top 10 with no relevance cut-off in the default mode (``as_of`` questions
pass ``as_of=``), first in the fresh tier, then after consolidation in the graph tier. Measures
per question kind (``current``, ``as_of``, ``unchanged``), as percentages: gold@1 (the top hit
is a gold memory), stale@1 (the top hit is a stale one), gold_above_stale (a gold memory is
retrieved and ranks above every retrieved stale one) and gold@10. ``parsed`` repeats the
``as_of`` questions with their ``asked_at`` and no ``as_of``: the moment read from the question's
words alone (:mod:`qortex_core.memory.asked_time`).
"""

from __future__ import annotations

import json
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

from qortex_core.errors import DatasetError, HomeError

KINDS = ("current", "as_of", "unchanged")
MEASURES = ("gold@1", "stale@1", "gold_above_stale", "gold@10")
TOP_K = 10


@dataclass(frozen=True)
class UpdateQuestion:
    """One question: its kind, text, the gold and stale memory ids, and ``as_of`` if any."""

    id: str
    kind: str
    text: str
    gold: tuple[str, ...]
    stale: tuple[str, ...]
    as_of: str | None = None
    asked_at: str | None = None


@dataclass(frozen=True)
class UpdatesFile:
    """The memories (id, text, time) in write order, and the questions."""

    path: Path
    memories: tuple[tuple[str, str, str | None], ...]
    questions: tuple[UpdateQuestion, ...]


def _question(raw: object, known: set[str]) -> UpdateQuestion:
    if not isinstance(raw, dict) or raw.get("kind") not in KINDS:
        raise DatasetError(f"a question must be an object with kind one of {KINDS}: {raw!r:.80}")
    gold, stale = raw.get("gold") or [], raw.get("stale") or []
    if not isinstance(raw.get("question"), str) or not gold or set(gold + stale) - known:
        raise DatasetError(f"question {raw.get('id')!r}: needs text and gold ids of the memories")
    if raw["kind"] == "as_of" and not isinstance(raw.get("as_of"), str):
        raise DatasetError(f"question {raw.get('id')!r}: an as_of question needs as_of")
    return UpdateQuestion(
        str(raw.get("id", "")), raw["kind"], raw["question"], tuple(gold), tuple(stale),
        raw.get("as_of") if raw["kind"] == "as_of" else None,
        raw.get("asked_at") if isinstance(raw.get("asked_at"), str) else None,
    )  # fmt: skip


def load_updates(path: str | Path) -> UpdatesFile:
    """Read and check an updates file (``memories`` and ``questions``).

    Raises:
        DatasetError: unreadable, not JSON, or not of the format.
    """
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DatasetError(f"cannot read updates file {path}: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("memories"), list):
        raise DatasetError(f"{path}: expected an object with 'memories' and 'questions'")
    memories = []
    for m in data["memories"]:
        if not isinstance(m, dict) or not isinstance(m.get("text"), str) or "id" not in m:
            raise DatasetError(f"{path}: a memory must be {{id, text, time}}: {m!r:.80}")
        memories.append((str(m["id"]), m["text"], m.get("time")))
    known = {m[0] for m in memories}
    questions = tuple(_question(q, known) for q in data.get("questions") or [])
    if not memories or not questions:
        raise DatasetError(f"{path}: no memories or no questions")
    return UpdatesFile(path, tuple(memories), questions)


def score(ranked: Sequence[frozenset[str]], question: UpdateQuestion) -> dict[str, bool]:
    """The four measures of one ranking (each hit: the file ids it stands for)."""
    gold, stale = set(question.gold), set(question.stale)
    gold_at = next((i for i, ids in enumerate(ranked) if ids & gold), None)
    stale_at = next((i for i, ids in enumerate(ranked) if ids & stale and not ids & gold), None)
    top = ranked[0] if ranked else frozenset()
    return {
        "gold@1": bool(top & gold),
        "stale@1": bool(top & stale) and not top & gold,
        "gold_above_stale": gold_at is not None and (stale_at is None or gold_at < stale_at),
        "gold@10": gold_at is not None,
    }


def summarise(rows: list[tuple[str, dict[str, bool]]]) -> dict[str, dict[str, float]]:
    """Per kind: each measure as a percentage of that kind's questions (and their count)."""
    out: dict[str, dict[str, float]] = {}
    for kind in KINDS:
        mine = [s for k, s in rows if k == kind]
        if mine:
            out[kind] = {m: round(100.0 * sum(s[m] for s in mine) / len(mine), 1) for m in MEASURES}
            out[kind]["questions"] = len(mine)
    return out


Ask = Callable[[UpdateQuestion], list[str]]  # a question -> the ranked hit ids


def ask_all(data: UpdatesFile, ask: Ask, ids_of: Callable[[str], frozenset[str]]) -> dict:
    """Every question asked and scored; the per-kind summary."""
    rows = []
    for q in data.questions:
        ranked = [ids_of(h) for h in ask(q)]
        rows.append((q.kind, score(ranked, q)))
    return summarise(rows)


def _empty_home(home: Path | None) -> tuple[Path, tempfile.TemporaryDirectory | None]:
    """The home to write into: ``home`` (absent or empty), else a temporary folder.

    Raises:
        HomeError: ``home`` exists and holds something.
    """
    if home is None:
        tmp = tempfile.TemporaryDirectory(prefix="qortex-updates-")
        return Path(tmp.name), tmp
    if home.exists() and (not home.is_dir() or any(home.iterdir())):
        raise HomeError(f"--home {home} is not an empty folder: the benchmark writes a new home")
    home.mkdir(parents=True, exist_ok=True)
    return home, None


def _write(mem, data: UpdatesFile) -> tuple[dict[str, str], list[float]]:
    """Each memory remembered in file order; record id -> file id, and each call's ms."""
    owner, took = {}, []
    for file_id, text, when in data.memories:
        t = time.perf_counter()
        record = mem.remember(text, time=when, metadata={"updates_id": file_id})
        took.append(1000.0 * (time.perf_counter() - t))
        owner[record.id] = file_id
    return owner, took


def _asker(mem, mode: str, as_of: bool | None) -> Ask:
    """Ask with ``as_of=`` (True), ``until=`` (False) or neither (None: the question's own
    words and ``asked_at`` say the moment)."""

    def ask(q: UpdateQuestion) -> list[str]:
        timing: dict = {"as_of": q.as_of} if as_of and q.as_of else {"asked_at": q.asked_at}
        if as_of is False and q.as_of:
            timing = {"until": q.as_of}
        result = mem.search(q.text, top_k=TOP_K, mode=mode, min_relevance=0.0, **timing)
        return [h.id for h in result.passages]

    return ask


def _parsed(data: UpdatesFile, mem, mode: str, ids_of) -> dict:
    """The ``as_of`` questions asked with ``asked_at`` and no ``as_of``: parsing alone."""
    only = UpdatesFile(data.path, data.memories, tuple(q for q in data.questions if q.as_of))
    return ask_all(only, _asker(mem, mode, None), ids_of) if only.questions else {}


def _graph_ids(home: Path, owner: dict[str, str]) -> Callable[[str], frozenset[str]]:
    """Passage or record id -> the file ids it stands for (merged records included)."""
    from qortex_core.memory.consolidate import load_state
    from qortex_core.memory.records import DOC_PREFIX
    from qortex_core.storage import snapshot as snap
    from qortex_core.storage.store import LanceStore

    state = load_state(LanceStore.open(home))
    into = {r: row["target"] for r, row in state.current.items() if row["op"] == "merged"}
    stands: dict[str, set[str]] = {}
    for rid, file_id in owner.items():
        survivor, hops = rid, 0
        while survivor in into and hops < 100:
            survivor, hops = into[survivor], hops + 1
        stands.setdefault(survivor, set()).add(file_id)
    passages = snap.load(home, snap.latest_name(home)).tables["passages"]
    of_passage = {
        pid: doc[len(DOC_PREFIX) :]
        for pid, doc in zip(passages["id"].to_pylist(), passages["doc_id"].to_pylist())
    }
    return lambda hid: frozenset(stands.get(of_passage.get(hid, hid), ()))


def run_updates(
    path: str | Path,
    home: Path | None = None,
    modes: Sequence[str] = ("auto",),
    embedder=None,
    progress=None,
    as_of: bool = True,
) -> dict:
    """The whole benchmark (see the module docstring); the report as a dict.

    ``modes``: the first is the default mode of ``results``; the others go under ``modes``.
    ``as_of``: False asks ``as_of`` questions with ``until=`` instead (the filter alone).
    """
    from qortex_bench.locomo_memory import consolidate_home
    from qortex_core.agent.api import open_memory
    from qortex_core.ingest.extract import OfflineExtractor

    data = load_updates(path)
    where, tmp = _empty_home(home)
    try:
        mem = open_memory(where, embedder=embedder)
        note = progress or (lambda *_: None)
        note("remember", 0, len(data.memories))
        owner, took = _write(mem, data)
        note("remember", len(data.memories), len(data.memories))
        direct = {rid: frozenset({fid}) for rid, fid in owner.items()}
        fresh_ids = lambda h: direct.get(h, frozenset())  # noqa: E731
        fresh = {m: ask_all(data, _asker(mem, m, as_of), fresh_ids) for m in modes}
        parsed = {"fresh": _parsed(data, mem, modes[0], fresh_ids)}
        t = time.perf_counter()
        consolidate_home(where, mem.embedder, None, OfflineExtractor())
        consolidate_s = time.perf_counter() - t
        ids_of = _graph_ids(where, owner)
        graph = {m: ask_all(data, _asker(mem, m, as_of), ids_of) for m in modes}
        parsed["graph"] = _parsed(data, mem, modes[0], ids_of)
    finally:
        if tmp is not None:
            tmp.cleanup()
    report = {
        "file": str(data.path),
        "memories": len(data.memories),
        "questions": len(data.questions),
        "mode": modes[0],
        "as_of": "as_of" if as_of else "until",
        "results": {"fresh": fresh[modes[0]], "graph": graph[modes[0]]},
        "parsed": parsed,
        "remember_ms_p50": round(statistics.median(took), 2),
        "consolidate_s": round(consolidate_s, 2),
    }
    if len(modes) > 1:
        report["modes"] = {m: {"fresh": fresh[m], "graph": graph[m]} for m in modes[1:]}
    return report
