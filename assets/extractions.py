"""``extractions``: concepts, typed relations and rules for every chunk not yet extracted (pool
"llm")."""

from typing import Mapping

from dagster import AssetExecutionContext, MaterializeResult, asset

from assets.reporting import markdown_table, progress_logger
from pipelines.resources import ExtractorResource, StoreResource
from qortex_core.ingest.extract import Extractor
from qortex_core.ingest.prices import price_of
from qortex_core.ingest.stages import ExtractReport, extract_chunks, upstream_of

COUNTERS = ("calls", "prompt_tokens", "completion_tokens", "cost_usd", "failures")


def counters(ex: Extractor) -> dict[str, float]:
    """The extractor's usage counters now (the offline ones have none: zeros)."""
    return {name: getattr(ex, name, 0) for name in COUNTERS}


def extraction_metadata(
    context: AssetExecutionContext, report: ExtractReport, ex: Extractor, used: Mapping[str, float]
) -> dict:
    """The ``extractions`` asset's metadata; ``used``: LLM calls and tokens this step spent."""
    if report.failed:
        context.log.warning(
            f"{report.failed} chunks failed extraction; they are recorded and retried next run"
        )
    config = getattr(ex, "config", None)  # the LLM extractor's; the offline ones call no LLM
    model = getattr(config, "model", "") or ""
    llm_calls = int(used["calls"]) if config is not None else 0
    price = price_of(
        model, getattr(config, "price_in_per_1k", 0.0), getattr(config, "price_out_per_1k", 0.0)
    )
    cost = price.cost(int(used["prompt_tokens"]), int(used["completion_tokens"]))
    return {
        "chunks": report.chunks,
        "extracted": report.extracted,
        "cache_hits": report.cached,
        "rows_added": report.extracted + report.failed,
        "mode": "incremental" if report.cached else "full",
        "reason": "only chunks without a successful extraction under this extractor were sent"
        if report.cached
        else "no chunk had an extraction yet",
        "failed": report.failed,
        "ungrounded_dropped": report.ungrounded_dropped,  # LLM links to names not in the passage
        "extractor": ex.cache_key,
        "model": model or "none (no LLM)",
        "llm_calls": llm_calls,
        "prompt_tokens": int(used["prompt_tokens"]),
        "completion_tokens": int(used["completion_tokens"]),
        "estimated_cost_usd": round(cost, 6),
        "price_source": price.source,
        "dagster/row_count": report.chunks,
        "summary": markdown_table(
            ["chunks", "extracted", "cached", "failed", "calls"],
            [(report.chunks, report.extracted, report.cached, report.failed, llm_calls)],
        ),
    }


@asset(
    group_name="ingest",
    kinds={"openai", "lancedb"},
    deps=[upstream_of("extractions")],
    pool="llm",
    description="OpenIE per chunk, cached by (chunk hash, model, prompt version); failures "
    "recorded and retried.",
)
def extractions(
    context: AssetExecutionContext, store: StoreResource, extractor: ExtractorResource
) -> MaterializeResult:
    ex = extractor.get()
    before = counters(ex)
    report = extract_chunks(store.open(), ex, progress=progress_logger(context))
    used = {name: value - before[name] for name, value in counters(ex).items()}
    return MaterializeResult(metadata=extraction_metadata(context, report, ex, used))
