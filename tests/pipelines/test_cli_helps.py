"""A CLI that helps: did-you-mean on typos, usage errors before any model loads, ``ingest FILE``,
summaries that count passages, empty listings that say so, whole answer passages without weak
hits or unsupported rules, ``--filter``, and progress bars with rate and ETA on a terminal.

In-process CLI runs (:func:`~tests.reliability.faults.run_cli`) over a real home built by the real
ingest job, with the offline extractor and the hashing embedder (the model is not the point).
"""

from __future__ import annotations

import io
import json
import logging
import sys
from pathlib import Path

import pytest

import qortex_core
import qortex_core.embed as embed
from qortex_cli.bars import StageProgress
from qortex_cli.commands.query import shown
from qortex_core.query.results import PassageHit, QueryResult
from qortex_core.query.rules import RuleHit

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "reliability"))
from faults import error_line, run_cli  # noqa: E402

SPEC = "hash:64"
LONG = (
    "The Quillon Dam logbook for the spring season records every inspection, every repair of "
    "the sluice gates and every visit of the river board, and at its very end it names the "
    "keeper of the dam that year: Ottoline Brask."
)


@pytest.fixture(scope="module")
def hashed(tmp_path_factory):
    with pytest.MonkeyPatch.context() as patch:
        # set here, so that leaving the module unsets it (an ingest exports DAGSTER_HOME)
        patch.setenv("DAGSTER_HOME", str(tmp_path_factory.mktemp("dagster")))
        patch.setenv("QORTEX_EMBEDDER", SPEC)
        patch.setenv("QORTEX_EXTRACTOR", "offline")
        yield


@pytest.fixture(scope="module")
def corpus_home(tmp_path_factory, hashed):
    """One corpus file of 300 entries (the last one long) ingested as a file, not a folder."""
    from qortex_cli import main as cli

    root = tmp_path_factory.mktemp("helps")
    rows = [
        {"title": f"Widget {n}", "text": f"Widget {n} was repaired by crew {n % 7} in Lowmarsh."}
        for n in range(299)
    ] + [{"title": "Quillon Dam", "text": LONG}]
    corpus = root / "src" / "corpus.json"
    corpus.parent.mkdir()
    (corpus.parent / "other.md").write_text("A file beside it that must not be ingested.\n")
    corpus.write_text(json.dumps(rows))
    home = root / "home"
    out, err = io.StringIO(), io.StringIO()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sys, "stdout", out)
        patch.setattr(sys, "stderr", err)
        code = cli.main(["ingest", str(corpus), "--home", str(home)])
    assert code == 0, err.getvalue()
    return home, out.getvalue(), err.getvalue()


# -- did you mean ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("argv", "fragments"),
    [
        (["injest", "x"], ["unknown command 'injest': did you mean 'ingest'?"]),
        (["memoreis"], ["did you mean 'memories'?"]),
        (["graph", "neigbors", "x"], ["qortex graph: unknown command 'neigbors'", "'neighbors'?"]),
        (["query", "x", "--mdoe", "dense"], ["unknown option '--mdoe': did you mean '--mode'?"]),
        (["factors", "update", "--via", "dagstr"], ["invalid choice 'dagstr'", "'dagster'?"]),
        (["query", "x", "--mode", "hipporag2"], ["unknown mode 'hipporag2'", "'hipporag'?"]),
        (["eval", "--modes", "dense,hybird"], ["unknown mode 'hybird'", "'hybrid'?"]),
        (["query", "x", "--filter", "user~ann"], ["bad filter 'user~ann'", "KEY=VALUE"]),
        (["query", "x", "--filter", "n>=soon"], ["filter 'gte' on 'n'", "ISO 8601"]),
    ],
)
def test_a_typo_is_one_line_with_a_suggestion_exit_2(capsys, argv, fragments):
    line = error_line(run_cli(capsys, *argv), 2, *fragments)
    assert "qortex: error: qortex:" not in line  # the program is named once


def test_usage_errors_come_before_any_model_loads(corpus_home, capsys, monkeypatch):
    """A snapshot home, where a query loads the embedder first: the typo never gets there."""
    home = corpus_home[0]
    built = []

    def loading(*args, **kwargs):
        built.append(args)
        raise AssertionError("the embedder was constructed")

    monkeypatch.setattr(embed, "make_embedder", loading)
    monkeypatch.setattr(embed.SentenceTransformerEmbedder, "__init__", loading)
    monkeypatch.setattr(embed.HashEmbedder, "__init__", loading)
    for argv in (
        ["query", "who keeps the dam", "--mode", "hipporag2"],
        ["query", "who keeps the dam", "--filter", "user=a", "--filter", "user=b"],
        ["query", "who keeps the dam", "--filter", '{"user": {"like": 1}}'],
    ):
        error_line(run_cli(capsys, *argv, "--home", home), 2)
    assert built == []


# -- ingest a file; summaries; empty listings --------------------------------------------------
def test_ingest_takes_a_file_and_counts_its_passages(corpus_home):
    home, out, err = corpus_home
    assert out.startswith("ingested 1 document, 300 passages (1 new, 0 changed, 0 deleted)"), out
    retriever_passages = qortex_core.open(home).retriever().view.n_passages
    assert retriever_passages == 300  # the file beside it was not ingested
    assert "\r" not in err and "  extractions: extract: 300/300" in err  # not a terminal: lines


def test_a_missing_source_names_both_kinds(capsys, tmp_path):
    error_line(run_cli(capsys, "ingest", tmp_path / "nope", "--home", tmp_path / "h"), 2,
               "source not found", "a folder, or one .md, .txt, .json or .jsonl file")  # fmt: skip


def test_empty_listings_say_so(capsys, tmp_path, hashed):
    home = tmp_path / "home"
    listed = run_cli(capsys, "memories", "--home", home)
    assert (listed.code, listed.stdout) == (0, "no memories\n")
    run_cli(capsys, "remember", "the pump was serviced", "--home", home, "--domain", "ops")
    narrowed = run_cli(capsys, "memories", "--home", home, "--domain", "kitchen")
    assert narrowed.stdout == "no memories matching these options\n"
    assert "the pump was serviced" in run_cli(capsys, "memories", "--home", home).stdout


# -- the printed answer ------------------------------------------------------------------------
def test_the_answer_shows_its_whole_passage(corpus_home, capsys):
    question = "the Quillon Dam logbook of the spring season records every inspection"
    asked = run_cli(capsys, "query", question, "--home", corpus_home[0], "--top-k", "1")
    assert asked.code == 0, asked.stderr
    head, body = asked.stdout.split("\n", 2)[1], " ".join(asked.stdout.split())
    assert "Quillon Dam" in head and " ".join(LONG.split()) in body  # "Ottoline Brask." too


def test_weak_hits_are_left_out_of_the_printed_answer(corpus_home, capsys):
    argv = ["query", "the Quillon Dam logbook", "--home", corpus_home[0], "--top-k", "20"]
    every = json.loads(run_cli(capsys, *argv, "--min-relevance", "0", "--json").stdout)
    relevances = sorted(p["relevance"] for p in every["passages"])
    cut = round((relevances[0] + relevances[-1]) / 2, 2)  # some hits on each side
    printed = run_cli(capsys, *argv, "--min-relevance", str(cut))
    listed = json.loads(run_cli(capsys, *argv, "--min-relevance", str(cut), "--json").stdout)
    strong = [p["id"] for p in listed["passages"] if p["relevance"] >= cut]
    weak = [p["id"] for p in listed["passages"] if p["relevance"] < cut]
    assert strong and weak, relevances
    assert all(i in printed.stdout for i in strong)
    assert not any(i in printed.stdout for i in weak)
    assert f"({len(weak)} weaker hit(s) below relevance {cut:.2f} not shown" in printed.stdout


def _hit(n: int, relevance: float, concepts: tuple[str, ...]) -> PassageHit:
    return PassageHit(f"p_{n}", "", "text", "default", 1.0 - n / 10, {}, concept_ids=concepts,
                      relevance=relevance)  # fmt: skip


def test_rules_without_support_among_the_shown_hits_are_left_out():
    hits = [_hit(0, 0.9, ("c_pump",)), _hit(1, 0.6, ("c_valve",)), _hit(2, 0.1, ("c_dam",))]
    rules = [
        RuleHit("r_pump", "Pumps need oil.", "", 1.0, 0.5, ("pump",), ("c_pump",)),
        RuleHit("r_dam", "Dams need keepers.", "", 1.0, 0.4, ("dam",), ("c_dam",)),  # weak hit's
        RuleHit("r_tax", "Taxes are due.", "", 1.0, 0.9, ("tax",), ("c_tax",)),  # no hit's
    ]
    kept, kept_rules, weak = shown(QueryResult("q", "hipporag", "v1", hits, rules=rules), 0.5)
    assert [h.id for h in kept] == ["p_0", "p_1"] and weak == 1
    assert [r.id for r in kept_rules] == ["r_pump"]
    first_only = shown(QueryResult("q", "dense", "v1", [_hit(0, 0.2, ())]), 0.5)
    assert [h.id for h in first_only[0]] == ["p_0"]  # an answer always shows its first hit


def test_query_filter_on_the_command_line(capsys, tmp_path, hashed):
    home = tmp_path / "home"
    for user, n in (("ann", 1), ("bob", 2), ("cyd", 3)):
        meta = json.dumps({"user": user, "n": n})
        run_cli(
            capsys,
            "remember",
            f"{user} serviced the orion pump",
            "--home",
            home,
            "--metadata",
            meta,
        )
    ask = ["query", "who serviced the orion pump", "--home", home, "--json", "--min-relevance", "0"]

    def texts(*filters: str) -> set[str]:
        done = run_cli(capsys, *ask, *[f"--filter={f}" for f in filters])
        assert done.code == 0, done.stderr
        return {p["text"].split()[0] for p in json.loads(done.stdout)["passages"]}

    assert texts("user=bob") == {"bob"}
    assert texts("user=ann|cyd") == {"ann", "cyd"}
    assert texts("n>=2", "n<3") == {"bob"}
    assert texts('{"n": {"gt": 1}}', "user=cyd") == {"cyd"}
    assert texts('n="2"') == set()  # the string "2" is not the number 2


# -- progress --------------------------------------------------------------------------------
def test_a_terminal_gets_bars_with_rate_and_eta_and_a_pipe_gets_lines():
    bar, lines = io.StringIO(), io.StringIO()
    for progress, stream in ((StageProgress(bar, tty=True), bar), (StageProgress(lines), lines)):
        for done in range(0, 101, 5):
            progress("embed", done, 100)
    drawn = bar.getvalue()
    assert "\r" in drawn and "item/s" in drawn and "100/100" in drawn
    assert "<" in drawn.split("100/100")[-1]  # elapsed<remaining: the ETA
    assert lines.getvalue().splitlines() == [f"  embed: {n}/100" for n in range(0, 101, 10)]


def test_the_ingest_log_draws_a_bar_on_a_terminal():
    from qortex_cli.runs.loggers import _StderrProgress

    stream = io.StringIO()
    handler = _StderrProgress()
    handler.stages = StageProgress(stream, tty=True)
    for done in (0, 50, 100):
        record = logging.LogRecord("x", logging.INFO, "", 0, f"embed: {done}/100", None, None)
        record.dagster_meta = {"step_key": "embeddings", "orig_message": f"embed: {done}/100"}
        handler.emit(record)
    assert "embeddings: embed" in stream.getvalue() and "item/s" in stream.getvalue()


def test_an_ingest_started_on_a_terminal_draws_bars(capsys, tmp_path, hashed, monkeypatch):
    """The run decides (a step's own stderr is Dagster's capture, never the terminal)."""
    import qortex_cli.runs.local as run_local

    monkeypatch.setattr(run_local, "terminal", lambda stream: True)
    corpus = tmp_path / "notes.json"
    corpus.write_text(
        json.dumps([{"title": f"N{n}", "text": f"Note {n} on pumps."} for n in range(40)])
    )
    done = run_cli(capsys, "ingest", corpus, "--home", tmp_path / "home")
    assert done.code == 0 and done.stdout.startswith("ingested 1 document, 40 passages")
    assert "extractions: extract: 100%" in done.stderr and "item/s" in done.stderr
