"""LoCoMo evaluation (Maharana et al., ACL 2024): conversations as memories, evidence recall@k.

A LoCoMo file holds one long two-person conversation: ``session_N`` lists of turns
``{speaker, dia_id, text, blip_caption?}``, ``session_N_date_time`` (``1:56 pm on 8 May,
2023``) and ``qa`` (``question``, ``answer``, ``evidence`` turn ids like ``D1:3``,
``category``). Categories 1-4 are answerable (multi-hop, temporal, open-domain, single-hop)
and scored by evidence recall; category 5 is adversarial (the answer is not in the
conversation) and kept apart for abstention.

Each conversation is its own tenant: one passage per turn (the speaker in the text, a
shared photo's caption appended, the session's date as the event time), and its questions
are asked of that tenant only.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Sequence

from qortex_bench.locomo_data import Conversation, LocomoQuestion, Turn
from qortex_bench.locomo_facts import extractor_for, normalize_evidence, read_observations
from qortex_bench.locomo_score import CATEGORIES, evidence_recall
from qortex_bench.locomo_score import Tally as _Tally
from qortex_bench.locomo_score import summary as _summary
from qortex_core.errors import DatasetError
from qortex_core.query import modes as query_modes
from qortex_core.storage.model import Passage

ADVERSARIAL = 5
_SESSION = re.compile(r"^session_(\d+)$")


def session_time(text: str) -> str:
    """``1:56 pm on 8 May, 2023`` as ``2023-05-08T13:56:00Z`` (LoCoMo gives no zone: UTC).

    Raises:
        DatasetError: not in that form.
    """
    clean = " ".join(str(text).split())
    try:
        when = datetime.strptime(clean.upper(), "%I:%M %p ON %d %B, %Y")
    except ValueError:
        raise DatasetError(f"session date {text!r} is not like '1:56 pm on 8 May, 2023'") from None
    return when.replace(tzinfo=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def tenant_name(path: Path, taken: set[str]) -> str:
    """A tenant name from a file name (``conv-26.json`` -> ``conv-26``), unique among ``taken``."""
    base = re.sub(r"[^a-z0-9_-]+", "-", path.stem.lower()).strip("-_")[:56] or "conversation"
    name, n = base, 2
    while name in taken:
        name, n = f"{base}-{n}", n + 1
    return name


def _read(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DatasetError(f"LoCoMo file not found: {path}") from None
    except IsADirectoryError:
        raise DatasetError(f"LoCoMo path is a directory, not a file: {path}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise DatasetError(f"LoCoMo file {path} is not readable text: {exc}") from None
    except json.JSONDecodeError as exc:
        raise DatasetError(f"LoCoMo file {path} is not valid JSON: {exc.msg}") from None
    if isinstance(data, dict) and isinstance(data.get("conversation"), dict):
        # a row of the released locomo10.json: observations sit beside the conversation
        seen = data.get("observation")
        seen = seen if isinstance(seen, dict) else {}
        data = {**data["conversation"], **seen, "qa": data.get("qa")}
    if not isinstance(data, dict) or not isinstance(data.get("qa"), list):
        raise DatasetError(f"LoCoMo file {path} needs 'session_N' turn lists and a 'qa' list")
    return data


def _turns(data: dict, path: Path) -> list[Turn]:
    """Every turn of every session, in session order."""
    sessions = sorted(
        (int(m.group(1)), key) for key in data if (m := _SESSION.match(key)) and data[key]
    )
    out = []
    for n, key in sessions:
        when = session_time(data[f"{key}_date_time"]) if data.get(f"{key}_date_time") else None
        for row in data[key] if isinstance(data[key], list) else []:
            if not isinstance(row, dict) or not all(
                isinstance(row.get(f), str) for f in ("speaker", "dia_id", "text")
            ):
                raise DatasetError(
                    f"LoCoMo file {path}: {key} has a turn without speaker/dia_id/text"
                )
            caption = row.get("blip_caption")
            out.append(
                Turn(
                    "".join(row["dia_id"].split()),
                    n,
                    row["speaker"].strip(),
                    row["text"].strip(),
                    caption.strip() if isinstance(caption, str) else "",
                    when,
                )
            )
    if not out:
        raise DatasetError(f"LoCoMo file {path} has no session turns")
    return out


def load_conversation(path: str | Path, name: str | None = None) -> Conversation:
    """A LoCoMo conversation file (original release format, one conversation).

    Raises:
        DatasetError: unreadable, not LoCoMo-shaped, or a session date in another form.
    """
    path = Path(path)
    data = _read(path)
    turns = _turns(data, path)
    known = {t.dia_id for t in turns}
    answerable, adversarial, dropped = [], [], 0
    for n, row in enumerate(data["qa"]):
        if not isinstance(row, dict) or not str(row.get("question") or "").strip():
            raise DatasetError(f"LoCoMo file {path}: qa entry {n} has no 'question'")
        category = row.get("category")
        if category not in CATEGORIES:
            raise DatasetError(f"LoCoMo file {path}: qa entry {n} has category {category!r}")
        evidence = tuple(e for e in normalize_evidence(row.get("evidence")) if e in known)
        answer = row.get("answer", row.get("adversarial_answer", ""))
        q = LocomoQuestion(f"{path.stem}/{n}", str(row["question"]).strip(), str(answer),
                           evidence, category)  # fmt: skip
        if category == ADVERSARIAL:
            adversarial.append(q)
        elif evidence:
            answerable.append(q)
        else:
            dropped += 1
    return Conversation(
        name or tenant_name(path, set()), path, tuple(turns), tuple(answerable),
        tuple(adversarial), dropped, tuple(read_observations(data, known)),
    )  # fmt: skip


def turn_passage(turn: Turn, conversation: str, date_title: bool = True) -> Passage:
    """The passage a turn is indexed as (its id is the content hash of title and text).

    ``date_title``: the session's date (``2023-05-08``) is the passage title, as a turn written
    as a small dated document would be. On conv-26 with the bundled MiniLM it lifts dense R@5
    from 35.1 to 40.3 and hipporag from 34.1 to 41.4 (the offline extractor links each
    title to the names its passage introduces: one node per session).
    """
    title = turn.time[:10] if date_title and turn.time else ""
    doc_id = f"{conversation}#{turn.dia_id}"
    return Passage(turn.memory_text, title, doc_id, time=turn.time)


@dataclass(frozen=True)
class LocomoSetup:
    """What ``qortex eval --locomo`` runs: the conversation files, modes, cut-offs and data home."""

    files: tuple[Path, ...]
    home: Path
    modes: tuple[str, ...] = field(default_factory=query_modes.names)
    ks: tuple[int, ...] = (1, 2, 5, 10)
    date_title: bool = True  # see :func:`turn_passage`
    via: str = "documents"  # or "memory": remember_many + consolidation (locomo_memory.py)
    observations: bool = True  # the file's observations as recorded facts (:func:`extractor_for`)


def load_conversations(files: Sequence[Path]) -> list[Conversation]:
    """Every file as a conversation with its own tenant name."""
    if not files:
        raise DatasetError("no LoCoMo file given: use --locomo FILE [FILE ...]")
    out: list[Conversation] = []
    for path in files:
        out.append(load_conversation(path, tenant_name(Path(path), {c.name for c in out})))
    return out


def index_conversation(
    conv: Conversation, home: Path, embedder, date_title: bool = True, graph_config=None,
    observations: bool = True,
) -> dict:  # fmt: skip
    """Index a conversation's turns into its own tenant through the stage functions
    (``graph_config``: the snapshot's edge weights, default :class:`GraphConfig`;
    ``observations``: see :func:`extractor_for`).

    Returns ``{"tenant", "turns", "passages", "snapshot", "index_s"}``.
    """
    from qortex_bench.evaluate import check_home_is_for_eval
    from qortex_core.ingest import stages
    from qortex_core.storage.store import LanceStore
    from qortex_core.storage.tenants import tenant_home

    t = time.perf_counter()
    where = tenant_home(home, conv.name)
    store = LanceStore.open(where)
    check_home_is_for_eval(store, Path(where))
    passages = [turn_passage(turn, conv.name, date_title) for turn in conv.turns]
    run = stages.IngestRun(store, where, extractor_for(conv, observations), embedder, passages)
    if graph_config is not None:
        run = replace(run, graph_config=graph_config)
    report = stages.run_stages(run)["graph_snapshot"]
    assert isinstance(report, stages.SnapshotReport)
    path = report.path
    return {
        "file": str(conv.path),
        "tenant": conv.name,
        "turns": len(conv.turns),
        "passages": len({p.id for p in passages}),
        "questions": len(conv.questions),
        "adversarial": len(conv.adversarial),
        "no_evidence": conv.no_evidence,
        "observations": len(conv.observations) if observations else 0,
        "snapshot": path.name,
        "index_s": round(time.perf_counter() - t, 3),
    }


def ask_questions(
    retriever, conv: Conversation, vectors, mode: str, setup: LocomoSetup, tally: _Tally,
    where: dict[str, str] | None = None,
):  # fmt: skip
    """Ask every question of ``conv`` in ``mode``; add recall rows and abstentions to ``tally``
    (``where``: turn id -> passage id, default the passages of :func:`turn_passage`)."""
    if where is None:
        where = {t.dia_id: turn_passage(t, conv.name, setup.date_title).id for t in conv.turns}
    top, ks = max(setup.ks), setup.ks
    asked = list(conv.questions) + list(conv.adversarial)
    t = time.perf_counter()
    for q, v in zip(asked, vectors):
        res = retriever.search(q.text, v, top_k=top, mode=mode)
        tally.fallbacks += res.fallback is not None
        abstained = bool(getattr(res, "no_answer", False))
        if q.category == ADVERSARIAL:
            tally.abstained_adversarial += abstained
            continue
        tally.abstained_answerable += abstained
        ranked = [h.id for h in res.passages]
        tally.rows.append(
            (q.category, {k: evidence_recall(ranked, q.evidence, where, k) for k in ks})
        )
    tally.seconds += time.perf_counter() - t


def run_locomo(setup: LocomoSetup, progress=None, retrieval_config=None, embedder=None) -> dict:
    """Index every conversation into its own tenant, then score every mode on its questions.

    Returns a report shaped like ``qortex eval``'s: ``results`` {mode: {recall@k}},
    ``by_category`` {mode: {category: {recall@k}}}, ``abstention`` {mode: shares},
    ``timings``, ``conversations``.
    """
    from qortex_bench.evaluate import validate_setup
    from qortex_core.embed import make_embedder
    from qortex_core.query.retriever import RetrievalConfig, Retriever

    say = progress or (lambda stage, done, total: None)
    t0 = time.perf_counter()
    validate_setup(_as_eval_setup(setup))
    convs = load_conversations(setup.files)
    timings: dict[str, float] = {"load_s": time.perf_counter() - t0}
    embedder = embedder or make_embedder()
    tallies = {m: _Tally([]) for m in setup.modes}
    indexed = []
    for n, conv in enumerate(convs):
        say("index conversations", n, len(convs))
        report, where = _index(conv, setup, embedder)
        indexed.append(report)
        retriever = Retriever.open(
            setup.home, embedder=embedder, config=retrieval_config or RetrievalConfig(),
            tenant=conv.name,
        )  # fmt: skip
        t = time.perf_counter()
        vectors = embedder.embed([q.text for q in conv.questions + conv.adversarial])
        timings["embed_queries_s"] = timings.get("embed_queries_s", 0.0) + time.perf_counter() - t
        for mode in setup.modes:
            ask_questions(retriever, conv, vectors, mode, setup, tallies[mode], where)
    say("index conversations", len(convs), len(convs))
    timings["index_s"] = sum(c["index_s"] for c in indexed)
    answerable = sum(len(c.questions) for c in convs)
    adversarial = sum(len(c.adversarial) for c in convs)
    summaries = {m: _summary(t, setup.ks, answerable, adversarial) for m, t in tallies.items()}
    for mode, s in summaries.items():
        timings[f"{mode}_ms_per_query"] = s["ms_per_query"]
    timings["total_s"] = time.perf_counter() - t0
    return {
        "benchmark": "locomo",
        "questions": answerable,
        "adversarial": adversarial,
        "no_evidence": sum(c.no_evidence for c in convs),
        "passages": sum(c["passages"] for c in indexed),
        "results": {m: s["recall"] for m, s in summaries.items()},
        "by_category": {m: s["by_category"] for m, s in summaries.items()},
        "abstention": {m: s["abstention"] for m, s in summaries.items()},
        "fallbacks": {m: s["fallbacks"] for m, s in summaries.items()},
        "timings": timings,
        "conversations": indexed,
        "extractor": "offline",
        "date_title": setup.date_title,
        "via": setup.via,
        "observations": setup.observations,
        "embedding_model": embedder.name,
    }


def _index(conv: Conversation, setup: LocomoSetup, embedder) -> tuple[dict, dict | None]:
    """Index a conversation by ``setup.via``; its report and turn -> passage map (None: the
    passages of :func:`turn_passage`)."""
    if setup.via == "memory":
        from qortex_bench.locomo_memory import remember_conversation

        return remember_conversation(conv, setup.home, embedder, observations=setup.observations)
    if setup.via != "documents":
        raise DatasetError(f"LoCoMo via {setup.via!r}: use documents or memory")
    report = index_conversation(
        conv, setup.home, embedder, setup.date_title, observations=setup.observations
    )
    return report, None


def _as_eval_setup(setup: LocomoSetup):
    """The modes and cut-offs in the form :func:`qortex_bench.evaluate.validate_setup` checks."""
    from qortex_bench.evaluate import EvalSetup

    return EvalSetup(Path(), Path(), setup.home, modes=setup.modes, ks=setup.ks)
