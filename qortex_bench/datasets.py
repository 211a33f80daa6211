"""HippoRAG-format multi-hop QA data: questions, corpora, gold matching and recall@k."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from qortex_core.errors import DatasetError
from qortex_core.storage.model import Passage
from qortex_core.storage.source_files import read_bounded


@dataclass(frozen=True)
class Question:
    id: str
    text: str
    gold: tuple[str, ...]  # passage ids of the supporting paragraphs
    supporting: tuple[Passage, ...] = ()  # those paragraphs as the questions file gives them


def _parse_json(text: str, path: Path, what: str, line: int = 0) -> object:
    """``json.loads`` with a :class:`DatasetError` naming the file and line (``line``: a JSON-lines
    row)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise DatasetError(
            f"{what} file {path} is not valid JSON: {exc.msg} at line {line or exc.lineno}"
        ) from None
    except RecursionError:
        raise DatasetError(f"{what} file {path} is JSON nested too deeply to parse") from None


DATASET_MAX_BYTES = 4 << 30  # a dataset file larger than 4 GiB is refused, not read


def _read_json_list(path: str | Path, what: str) -> list:
    path = Path(path)
    if not path.exists():
        raise DatasetError(f"{what} file not found: {path}")
    if path.is_dir():
        raise DatasetError(f"{what} path is a directory, not a file: {path}")
    try:  # never blocks on a FIFO, never reads without a bound
        raw = read_bounded(path, DATASET_MAX_BYTES).data.decode("utf-8")
    except ValueError as exc:  # UnicodeDecodeError included
        raise DatasetError(f"{what} file {path} is not readable text: {exc}") from None
    data = (
        _parse_json(raw, path, what)
        if path.suffix != ".jsonl"
        else [
            _parse_json(line, path, what, n)
            for n, line in enumerate(raw.splitlines(), 1)
            if line.strip()
        ]
    )
    if not isinstance(data, list) or not data:
        raise DatasetError(f"{what} file {path} must hold a non-empty JSON list")
    return data


def load_corpus(path: str | Path, domain: str = "default") -> list[Passage]:
    """Passages from a HippoRAG corpus file: a list of ``{title, text}``."""
    out = []
    for n, row in enumerate(_read_json_list(path, "corpus")):
        if (
            not isinstance(row, dict)
            or not isinstance(row.get("text"), str)
            or not isinstance(row.get("title", ""), str)
        ):
            raise DatasetError(f"corpus file {path}: entry {n} needs string 'title' and 'text'")
        if not row["text"].strip():
            raise DatasetError(f"corpus file {path}: entry {n} has empty text")
        out.append(
            Passage(
                text=row["text"],
                title=row.get("title", ""),
                doc_id=f"{Path(path).name}#{n}",
                domain=domain,
            )
        )
    return out


def _context_paragraphs(row: dict) -> list | None:
    """HotpotQA / 2Wiki rows (``context`` [[title, [sentences]]], ``supporting_facts`` [[title, i]])
    as paragraphs."""
    context, facts = row.get("context"), row.get("supporting_facts")
    if not isinstance(context, list) or not isinstance(facts, list):
        return None
    titles = {f[0] for f in facts if isinstance(f, list) and f and isinstance(f[0], str)}
    out = []
    for item in context:
        if not (
            isinstance(item, list)
            and len(item) == 2
            and isinstance(item[0], str)
            and isinstance(item[1], list)
        ):
            return None
        out.append(
            {
                "title": item[0],
                "paragraph_text": " ".join(str(x).strip() for x in item[1]),
                "is_supporting": item[0] in titles,
            }
        )
    return out


_HOP_REF = re.compile(r"#(\d+)")


def single_hop_rows(rows: Sequence[object], path: str | Path) -> list[dict]:
    """MuSiQue rows turned into their single-hop sub-questions, each with its one supporting
    paragraph.

    A step's ``#n`` is replaced by the answer of step n; steps that stay symbolic
    (``#1 >> country``) or name no paragraph are left out.

    Raises:
        DatasetError: no row has a ``question_decomposition``.
    """
    out = []
    for n, row in enumerate(rows):
        if not isinstance(row, dict):
            continue
        steps = row.get("question_decomposition")
        if not isinstance(steps, list):
            continue
        answers = [str(s.get("answer", "")) if isinstance(s, dict) else "" for s in steps]
        paragraphs = {
            p["idx"]: p
            for p in row.get("paragraphs") or []
            if isinstance(p, dict) and p.get("idx") is not None
        }
        for i, step in enumerate(steps):
            if not isinstance(step, dict) or not isinstance(step.get("question"), str):
                continue
            refs = [int(m) for m in _HOP_REF.findall(step["question"])]
            if any(not 0 < r <= len(answers) or not answers[r - 1].strip() for r in refs):
                continue  # refers to a step with no answer: it cannot be asked on its own
            text = _HOP_REF.sub(lambda m: answers[int(m.group(1)) - 1], step["question"])
            para = (
                paragraphs.get(step.get("paragraph_support_idx"))
                if step.get("paragraph_support_idx") is not None
                else None
            )
            if ">>" in text or para is None:
                continue
            out.append(
                {
                    "id": f"{row.get('id', n)}/{i + 1}",
                    "question": text,
                    "paragraphs": [dict(para, is_supporting=True)],
                }
            )
    if not out:
        raise DatasetError(
            f"questions file {path} has no 'question_decomposition' steps to ask one hop at a time"
        )
    return out


def load_questions(path: str | Path, single_hop: bool = False) -> list[Question]:
    """Questions with gold passages: paragraphs with ``is_supporting: true`` (MuSiQue form), or the
    ``context`` paragraphs named by ``supporting_facts`` (HotpotQA / 2WikiMultiHopQA form).

    ``single_hop``: ask the MuSiQue decomposition steps instead (:func:`single_hop_rows`).
    """
    out = []
    rows = _read_json_list(path, "questions")
    for n, row in enumerate(single_hop_rows(rows, path) if single_hop else rows):
        if (
            not isinstance(row, dict)
            or not isinstance(row.get("question"), str)
            or not row["question"].strip()
        ):
            raise DatasetError(f"questions file {path}: entry {n} has no 'question' text")
        paragraphs = row.get("paragraphs")
        if paragraphs is None:
            paragraphs = _context_paragraphs(row)
        if not isinstance(paragraphs, list):
            raise DatasetError(
                f"questions file {path}: entry {n} has no 'paragraphs' list "
                "(nor 'context' with 'supporting_facts')"
            )
        gold = []
        for para in paragraphs:
            if not isinstance(para, dict):
                raise DatasetError(f"questions file {path}: entry {n} has a malformed paragraph")
            if para.get("is_supporting"):
                text = para.get("paragraph_text", para.get("text"))
                if not isinstance(text, str):
                    raise DatasetError(
                        f"questions file {path}: entry {n} has a paragraph without text"
                    )
                gold.append(Passage(text=text, title=str(para.get("title", ""))))
        if not gold:
            raise DatasetError(f"questions file {path}: entry {n} has no supporting paragraph")
        unique = tuple({p.id: p for p in gold}.values())
        out.append(
            Question(
                str(row.get("id", row.get("_id", n))),
                row["question"],
                tuple(p.id for p in unique),
                unique,
            )
        )
    return out


def _loose_key(title: str, text: str) -> tuple[str, str]:
    """Title and text without any whitespace, case-folded (joined sentences may lose or gain
    spaces)."""
    return "".join(title.split()).casefold(), "".join(text.split()).casefold()


def match_gold(
    questions: Sequence[Question], passages: Sequence[Passage]
) -> tuple[list[Question], dict[str, int]]:
    """Gold passage ids resolved against the corpus, and how many matched each way.

    A supporting paragraph matches the corpus passage with the same title and text; failing
    that, the same title and text up to case and whitespace; failing that, the only corpus
    passage with its title. Counts: ``exact``, ``loose``, ``title``, ``missing``.
    """
    have = {p.id for p in passages}
    loose = {_loose_key(p.title, p.text): p.id for p in passages}
    by_title: dict[str, list[str]] = {}
    for p in passages:
        by_title.setdefault(" ".join(p.title.split()).casefold(), []).append(p.id)
    counts = {"exact": 0, "loose": 0, "title": 0, "missing": 0}
    out = []
    for q in questions:
        gold = []
        for gid, para in zip(q.gold, q.supporting or [None] * len(q.gold)):
            titled = (
                by_title.get(" ".join(para.title.split()).casefold(), [])
                if para is not None
                else []
            )
            if gid in have:
                way, gid = "exact", gid
            elif para is not None and _loose_key(para.title, para.text) in loose:
                way, gid = "loose", loose[_loose_key(para.title, para.text)]
            elif len(titled) == 1:
                way, gid = "title", titled[0]
            else:
                way = "missing"
            counts[way] += 1
            gold.append(gid)
        out.append(Question(q.id, q.text, tuple(dict.fromkeys(gold)), q.supporting))
    return out, counts


def recall_at_k(ranked: Sequence[str], gold: Sequence[str], k: int) -> float:
    """|gold in the top k| / |gold| for one question."""
    if not gold:
        raise ValueError("a question needs at least one gold passage")
    top = set(ranked[:k])
    return sum(g in top for g in gold) / len(set(gold))


def mean_recall(
    rankings: Sequence[Sequence[str]], questions: Sequence[Question], ks: Sequence[int]
) -> dict[str, float]:
    """Recall@k for each k, averaged over questions."""
    return {
        f"recall@{k}": sum(recall_at_k(r, q.gold, k) for r, q in zip(rankings, questions))
        / len(questions)
        for k in ks
    }
