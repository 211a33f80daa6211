"""Oracle answers for the recognition replay server: per question, every recorded triple of its gold passages.

A ceiling for the optional LLM recognition filter, not a model's output: a filter that
keeps exactly the candidate facts extracted from the supporting passages.

    .venv/bin/python scripts/recognition_oracle_answers.py QUESTIONS.json OPENIE.json OUT.json
    .venv/bin/python -m tests.recognition_loopback --answers OUT.json --port 0   # prints its base URL
    QORTEX_RECOGNITION_BASE_URL=URL QORTEX_RECOGNITION_MODEL=replay .venv/bin/qortex eval ... --recognition
"""

from __future__ import annotations

import json
import sys


def main(questions: str, openie: str, out: str) -> int:
    rows = json.load(open(questions, encoding="utf-8"))
    triples_of: dict[tuple[str, str], list] = {}
    for doc in json.load(open(openie, encoding="utf-8"))["docs"]:
        triples_of.setdefault((doc["title"], doc["text"]), doc.get("extracted_triples") or [])
    answers, missing = {}, 0
    for row in rows:
        kept = []
        for para in row["paragraphs"]:
            if not para.get("is_supporting"):
                continue
            found = triples_of.get((para["title"], para["paragraph_text"]))
            if found is None:
                missing += 1
                continue
            kept += [
                t
                for t in found
                if isinstance(t, list) and len(t) == 3 and all(isinstance(x, str) for x in t)
            ]
        answers[row["question"].strip()] = kept
    json.dump(answers, open(out, "w", encoding="utf-8"))
    print(
        f"{len(answers)} questions, {sum(map(len, answers.values()))} triples, {missing} gold passages without OpenIE"
    )
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    sys.exit(main(*sys.argv[1:]))
