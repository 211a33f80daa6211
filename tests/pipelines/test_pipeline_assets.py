"""The Dagster ingest pipeline: definitions, direct asset calls, whole-graph materialisation and incrementality.

Real parts throughout: LanceDB in temp homes, a real Dagster instance, the real
bundled embedder and the offline extractor, wrapped by counters defined here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np
import pytest
from dagster import (
    AssetKey,
    DagsterInstance,
    Definitions,
    RunRequest,
    SkipReason,
    build_asset_context,
    build_sensor_context,
    materialize,
)

from assets import INGEST_ASSETS, chunks, documents
from assets.chunks import ChunkingConfig
from pipelines.checks import INGEST_CHECKS
from pipelines.definitions import build_definitions
from pipelines.jobs import make_executor
from pipelines.resources import (
    EmbedderResource,
    ExtractorResource,
    ExtractorSettings,
    SourceResource,
    StoreResource,
    make_extractor,
)
from qortex_core.embed import EmbedderWrapper
from qortex_core.errors import ConfigError
from qortex_core.ingest.extract import OfflineExtractor
from qortex_core.ingest.stages import read_chunks, sync_chunks
from qortex_core.ops.table_checks import dangling_edges, extraction_status
from qortex_core.storage import snapshot as snap
from qortex_core.storage.model import Extraction, Passage
from qortex_core.storage.store import CONCEPTS, FACTS, LanceStore

# -- counting wrappers around the real components ------------------------------------------
SLOTS: dict[str, object] = {}


class CountingExtractor:
    """The offline extractor, recording which passages it was asked about."""

    def __init__(self) -> None:
        self.inner = OfflineExtractor()
        self.seen: list[str] = []

    @property
    def cache_key(self) -> str:
        return self.inner.cache_key

    @property
    def calls(self) -> int:
        return len(self.seen)

    def extract(self, passages: Sequence[Passage]) -> list[Extraction]:
        self.seen.extend(p.id for p in passages)
        return self.inner.extract(passages)


class CountingEmbedder(EmbedderWrapper):
    """The session's real embedder, recording every text it embeds."""

    def __init__(self, inner) -> None:
        super().__init__(inner)
        self.calls = 0
        self.texts: list[str] = []

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.calls += 1
        self.texts.extend(texts)
        return self.inner.embed(texts)


class SlotExtractor(ExtractorResource):
    slot: str = "extractor"

    def get(self):
        return SLOTS[self.slot]


class SlotEmbedder(EmbedderResource):
    slot: str = "embedder"

    def get(self):
        return SLOTS[self.slot]


DOCS = {
    "science/curie.md": "# Marie Curie\n\nMarie Curie was born in Warsaw. She moved to Paris in 1891.\n\n"
    "She worked at the Sorbonne with Pierre Curie.\n",
    "science/warsaw.md": "# Warsaw\n\nWarsaw is the capital of Poland. The Vistula River flows through Warsaw.\n",
    "cooking/bread.md": "# Sourdough\n\nSourdough uses a starter of wild yeast. Bakers in San Francisco love it.\n",
    "cooking/corpus.json": '[{"title": "Baguette", "text": "Baguette is a French bread from Paris."}]',
}


@pytest.fixture
def setup(tmp_path: Path, embedder):
    src = tmp_path / "src"
    for rel, text in DOCS.items():
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_text(text)
    SLOTS["extractor"], SLOTS["embedder"] = CountingExtractor(), CountingEmbedder(embedder)
    resources = {
        "store": StoreResource(home=str(tmp_path / "home")),
        "source": SourceResource(path=str(src)),
        "extractor": SlotExtractor(),
        "embedder": SlotEmbedder(),
    }
    return src, tmp_path / "home", resources


def _run(resources: dict, instance: DagsterInstance) -> dict[str, dict]:
    result = materialize(
        list(INGEST_ASSETS) + list(INGEST_CHECKS), resources=resources, instance=instance
    )
    assert result.success
    checks = {e.check_name: e.passed for e in result.get_asset_check_evaluations()}
    assert checks == {
        "no_dangling_edges": True,
        "every_chunk_accounted": True,
        "no_failed_extractions": True,
        "within_failure_budget": True,
        "snapshot_answers_probe": True,
    }
    return {
        e.materialization.asset_key.to_user_string(): {
            k: v.value for k, v in e.materialization.metadata.items()
        }
        for e in result.get_asset_materialization_events()
    }


# -- definitions --------------------------------------------------------------------------
def test_code_location_loads_with_job_schedule_sensor_and_checks() -> None:
    from pipelines.definitions import defs

    Definitions.validate_loadable(defs)
    job = defs.resolve_job_def("ingest")
    assert {n.name for n in job.graph.node_defs} >= {
        "documents",
        "chunks",
        "extractions",
        "embeddings",
        "synonym_edges",
        "graph_snapshot",
    }
    assert defs.resolve_schedule_def("ingest_schedule").cron_schedule == "0 3 * * *"
    assert defs.resolve_sensor_def("source_changed").job_name == "ingest"
    graph = defs.resolve_asset_graph()
    assert {k.name for k in graph.asset_check_keys} == {
        "no_dangling_edges",
        "every_chunk_accounted",
        "no_failed_extractions",
        "within_failure_budget",
        "snapshot_answers_probe",
    }
    budget = next(s for s in graph.asset_check_keys if s.name == "within_failure_budget")
    assert graph.get_check_spec(budget).blocking  # a failed budget stops the run
    assert defs.resolve_assets_def(AssetKey("extractions")).op.pool == "llm"


def test_configuration_chooses_executor_schedule_and_env_vars(tmp_path: Path) -> None:
    env = {
        "QORTEX_EXECUTOR": "multiprocess",
        "QORTEX_MAX_CONCURRENT": "3",
        "QORTEX_INGEST_CRON": "*/15 * * * *",
        "QORTEX_HOME": str(tmp_path),
        "QORTEX_LLM_API_KEY": "k-123",
    }
    defs = build_definitions(env)
    assert defs.resolve_job_def("ingest").executor_def.name == "multiprocess"
    assert defs.resolve_schedule_def("ingest_schedule").cron_schedule == "*/15 * * * *"
    resources = defs.resources
    assert (
        type(resources["store"].home).__name__ == "EnvVar"
        and resources["store"].home == "QORTEX_HOME"
    )
    assert (
        resources["extractor"].api_key == "QORTEX_LLM_API_KEY"
    )  # the name, resolved in the run process
    with pytest.raises(ConfigError):
        make_executor({"QORTEX_EXECUTOR": "threads"})
    with pytest.raises(ConfigError):
        make_executor({"QORTEX_EXECUTOR": "multiprocess", "QORTEX_MAX_CONCURRENT": "0"})


def test_extractor_is_chosen_from_configuration(tmp_path: Path, toy_dataset) -> None:
    assert type(make_extractor(ExtractorSettings())).__name__ == "OfflineExtractor"
    recorded = make_extractor(
        ExtractorSettings(kind="recorded", openie_path=str(toy_dataset.openie))
    )
    assert recorded.cache_key.startswith("recorded/")
    llm = make_extractor(
        ExtractorSettings(kind="auto", model="m-test", base_url="http://127.0.0.1:9/v1"), env={}
    )
    assert type(llm).__name__ == "LLMExtractor" and "m-test" in llm.cache_key
    with pytest.raises(ConfigError):
        make_extractor(ExtractorSettings(kind="recorded"))
    with pytest.raises(ConfigError):
        ExtractorSettings(kind="gpt")


# -- direct asset calls -------------------------------------------------------------------
def test_documents_and_chunks_assets_called_directly(setup) -> None:
    src, home, res = setup
    first = documents(build_asset_context(), source=res["source"], store=res["store"])
    assert first.metadata["documents"] == 4 and first.metadata["new_documents"] == 4
    (src / "science" / "warsaw.md").write_text("# Warsaw\n\nWarsaw is on the Vistula.\n")
    (src / "cooking" / "bread.md").unlink()
    second = documents(build_asset_context(), source=res["source"], store=res["store"])
    assert (
        second.metadata["changed_documents"],
        second.metadata["deleted_documents"],
        second.metadata["new_documents"],
    ) == (1, 1, 0)
    out = chunks(
        build_asset_context(),
        config=ChunkingConfig(max_tokens=12, overlap_tokens=3),
        store=res["store"],
        embedder=res["embedder"],
    )
    stored = read_chunks(LanceStore.open(home))
    assert out.metadata["chunks"] == len(stored) > 3  # small chunks split the documents
    assert {p.doc_id for p in stored} == {
        "science/curie.md",
        "science/warsaw.md",
        "cooking/corpus.json",
    }
    assert all(len(p.text.split()) <= 12 for p in stored)
    assert 0 < out.metadata["longest_chunk_tokens"] <= 12 and out.metadata["tokenizer"]


# -- the whole graph, incrementally ----------------------------------------------------------
def test_materialize_graph_then_incremental_runs(setup) -> None:
    src, home, res = setup
    instance = DagsterInstance.ephemeral()
    ex, em = SLOTS["extractor"], SLOTS["embedder"]

    first = _run(res, instance)
    all_chunks = read_chunks(
        LanceStore.open(home)
    )  # a fresh connection sees the latest table versions
    assert sorted(ex.seen) == sorted(p.id for p in all_chunks) and len(all_chunks) == 4
    assert (
        first["extractions"]["llm_calls"] == 0  # an offline extractor makes no LLM call
        and first["extractions"]["extracted"] == 4
        and first["embeddings"]["texts_embedded"] == len(set(em.texts)) > 4
    )
    assert (
        first["graph_snapshot"]["nodes_passage"] == 4
        and first["graph_snapshot"]["snapshot_version"] == 1
    )

    ex.seen.clear()
    em.calls = 0
    em.texts.clear()
    again = _run(res, instance)
    assert (ex.calls, em.calls) == (0, 0)  # unchanged sources: no LLM call, no embedding call
    assert again["extractions"]["llm_calls"] == 0 and again["embeddings"]["texts_embedded"] == 0
    assert (
        again["extractions"]["cache_hits"] == 4 and again["graph_snapshot"]["snapshot_version"] == 1
    )
    assert again["graph_snapshot"]["status"] == "unchanged"  # nothing new was published
    assert [first[a]["mode"] for a in ("synonym_edges", "graph_snapshot")] == ["full", "full"]
    assert [again[a]["mode"] for a in ("synonym_edges", "graph_snapshot")] == ["unchanged"] * 2

    (src / "science" / "warsaw.md").write_text(
        "# Warsaw\n\nWarsaw is the capital of Poland. Chopin lived in Warsaw.\n"
    )
    edited = _run(res, instance)
    now = read_chunks(LanceStore.open(home))
    warsaw = [p for p in now if p.doc_id == "science/warsaw.md"]
    assert ex.seen == [p.id for p in warsaw]  # only the edited document's chunk is re-extracted
    assert warsaw[0].full_text in em.texts and not any(
        p.full_text in em.texts for p in now if p not in warsaw
    )
    assert (
        "Chopin" in em.texts and "Marie Curie" not in em.texts
    )  # new concept embedded, old ones cached
    assert edited["documents"]["changed_documents"] == 1 and edited["chunks"]["deleted_chunks"] == 1
    snapshot = edited["graph_snapshot"]  # one passage of four changed: its vectors merged
    assert snapshot["mode"] == "incremental" and "merged from v000001-" in snapshot["reason"]
    assert snapshot["rows_added"] > 0 and snapshot["rows_removed"] > 0
    assert edited["synonym_edges"]["reason"]  # a quarter of the concepts: past the drift bound

    bread_chunk = next(p for p in now if p.doc_id == "cooking/bread.md")
    (src / "cooking" / "bread.md").unlink()
    ex.seen.clear()
    em.calls = 0
    deleted = _run(res, instance)
    assert (ex.calls, em.calls) == (0, 0)
    latest = snap.load(snap.snapshots_dir(home).parent)
    assert bread_chunk.id not in latest.tables["passages"]["id"].to_pylist()
    names = set(latest.tables["nodes"]["name"].to_pylist())
    assert "Sourdough" not in names and "San Francisco" not in names  # orphaned concepts are gone
    assert "Marie Curie" in names and deleted["documents"]["deleted_documents"] == 1
    facts = LanceStore.open(home).read(FACTS)
    assert not any(bread_chunk.id in plist for plist in facts["passage_ids"].to_pylist())

    (src / "science" / "warsaw.md").rename(
        src / "cooking" / "warsaw.md"
    )  # same text, another domain folder
    ex.seen.clear()
    em.calls = 0
    _run(res, instance)
    assert (ex.calls, em.calls) == (0, 0)
    passages = snap.load(home).tables["passages"].to_pylist()
    assert {p["domain"] for p in passages if p["title"] == "Warsaw"} == {"cooking"}


# -- checks and sensor --------------------------------------------------------------------
def test_check_logic_finds_missing_extractions_and_dangling_edges(setup) -> None:
    src, home, res = setup
    _run(res, DagsterInstance.ephemeral())
    store = LanceStore.open(home)
    key = SLOTS["extractor"].cache_key
    assert extraction_status(store, key) == {"ok": 4, "failed": 0, "missing": 0}
    sync_chunks(store, read_chunks(store) + [Passage("An unextracted chunk.", "Extra")])
    assert extraction_status(store, key)["missing"] == 1
    assert sum(dangling_edges(store).values()) == 0
    victim = store.read(FACTS)["subject_id"].to_pylist()[0]
    store.delete(CONCEPTS, "id", [victim])
    assert dangling_edges(store)["fact"] >= 1


def test_sensor_requests_a_run_only_when_sources_change(setup) -> None:
    src, home, res = setup
    sensor_def = build_definitions({}).resolve_sensor_def("source_changed")
    context = build_sensor_context(resources={"source": res["source"]})
    first = sensor_def(context)
    assert isinstance(first, RunRequest)
    context.update_cursor(first.run_key)
    assert isinstance(sensor_def(context), SkipReason)
    (src / "science" / "new.md").write_text("A new note.")
    assert isinstance(sensor_def(context), RunRequest)
    missing = build_sensor_context(resources={"source": SourceResource(path=str(src / "nope"))})
    assert isinstance(sensor_def(missing), SkipReason)


def test_repo_dagster_yaml_gives_a_queued_instance_with_pool_limits(
    tmp_path: Path, monkeypatch
) -> None:
    from qortex_cli.runs.local import local_instance

    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "restored-after-test"))
    instance = local_instance(tmp_path / "dagster")
    assert (tmp_path / "dagster" / "dagster.yaml").read_text() == (
        Path(__file__).parents[2] / "dagster.yaml"
    ).read_text()
    assert type(instance.run_coordinator).__name__ == "QueuedRunCoordinator"
    assert instance.get_concurrency_config().pool_config.default_pool_limit == 1
    assert (
        instance.event_log_storage.supports_global_concurrency_limits
    )  # sqlite storage under the folder
    assert Path(instance.root_directory) == tmp_path / "dagster"


def test_empty_source_raises_and_keeps_the_stored_documents(setup, tmp_path: Path) -> None:
    from qortex_core.errors import DatasetError
    from qortex_core.ingest.documents import read_stored_documents

    src, home, res = setup
    documents(build_asset_context(), source=res["source"], store=res["store"])
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "blank.md").write_text("\n")
    with pytest.raises(DatasetError, match="no usable document"):
        documents(
            build_asset_context(),
            source=SourceResource(path=str(tmp_path / "empty")),
            store=res["store"],
        )
    assert len(read_stored_documents(LanceStore.open(home))) == 4


def test_graph_snapshot_asset_takes_weights_from_run_config(setup):
    from dagster import RunConfig

    from assets.graph_snapshot import GraphWeights

    _, home, resources = setup
    result = materialize(
        list(INGEST_ASSETS),
        resources=resources,
        instance=DagsterInstance.ephemeral(),
        run_config=RunConfig({"graph_snapshot": GraphWeights(fact_weight=2.5, passage_weight=0.5)}),
    )
    assert result.success
    manifest = snap.load(home).manifest
    assert (
        manifest["params"]["graph"]["fact_weight"] == 2.5
        and manifest["params"]["graph"]["passage_weight"] == 0.5
    )
    adj = snap.load(home).adjacency
    n = manifest["counts"]["phrases"]
    assert set(np.unique(adj[n:, :n].data).tolist()) == {0.5}
