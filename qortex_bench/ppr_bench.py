"""PPR engines side by side on one graph: latency, memory and accuracy against an exact solution.

Engines (each prepared once, then timed per query):

- ``qortex``: :func:`qortex_core.query.ppr.solve.personalized_pagerank` on a :class:`SymmetricWalk`;
- ``qortex_batched``: the same, all queries in one (n, q) call (throughput);
- ``scipy_power``: plain float32 scipy power iteration to an L1 change of 1e-7;
- ``igraph_prpack``: ``Graph.personalized_pagerank(..., implementation="prpack")`` as HippoRAG 2
calls it;
- ``networkx``: ``networkx.pagerank`` with personalization (small graphs only).

The exact solution is float64 power iteration to an L1 change of 1e-12.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, replace
from typing import Callable, TypeVar

import numpy as np
import scipy.sparse as sp

from qortex_core.query.ppr.solve import (
    PPRConfig,
    personalized_pagerank,
    symmetric_walk,
    walk_matrix,
)

T = TypeVar("T")

DAMPING = 0.5


@dataclass(frozen=True)
class Engine:
    """A prepared engine: ``run(teleport (n,)) -> scores (n,)``, or a batch runner."""

    name: str
    run: Callable[[np.ndarray], np.ndarray]
    prepare_s: float
    batched: bool = False
    note: str = ""


# -- exact and plain baselines ----------------------------------------------------------------
def exact_pagerank(
    adjacency: sp.csr_matrix,
    teleports: np.ndarray,
    damping: float = DAMPING,
    tol: float = 1e-12,
    max_iter: int = 500,
) -> np.ndarray:
    """Float64 power iteration over all (n, q) teleports at once, to an L1 change of ``tol``."""
    walk = walk_matrix(adjacency).astype(np.float64)
    t = np.asarray(teleports, np.float64)
    t = t / np.where(t.sum(axis=0) > 0, t.sum(axis=0), 1.0)
    x = t.copy()
    for _ in range(max_iter):
        step = damping * (walk @ x)
        new = step + (1.0 - step.sum(axis=0)) * t
        delta = float(np.abs(new - x).sum(axis=0).max())
        x = new
        if delta < tol:
            break
    return x / x.sum(axis=0)


def scipy_power(
    walk: sp.csr_matrix,
    t: np.ndarray,
    damping: float = DAMPING,
    tol: float = 1e-7,
    max_iter: int = 100,
) -> np.ndarray:
    """The plain loop: float32 ``x <- a W x + (1 - a 1^T W x) t`` until the L1 change < ``tol``."""
    t = (t / t.sum()).astype(np.float32)
    x = t.copy()
    for _ in range(max_iter):
        step = np.float32(damping) * (walk @ x)
        new = step + (1.0 - step.sum()) * t
        delta = float(np.abs(new - x).sum())
        x = new
        if delta < tol:
            break
    return x


# -- engines ------------------------------------------------------------------------------------
def _timed(build: Callable[[], T]) -> tuple[T, float]:
    t = time.perf_counter()
    value = build()
    return value, time.perf_counter() - t


def qortex_engines(adjacency: sp.csr_matrix, n_phrases: int, config: PPRConfig) -> list[Engine]:
    """The symmetric solver per query (compiled passes, and the numpy solve) and batched;
    background = the passage nodes."""
    background = np.zeros(adjacency.shape[0], np.float32)
    background[n_phrases:] = 1.0

    def build():
        walk = symmetric_walk(adjacency, background=background)
        personalized_pagerank(walk, background, config)  # solves the background once
        return walk

    walk, prep = _timed(build)
    numpy_config = replace(config, compiled=False)
    note = (
        f"conjugate gradients, compiled passes, certified L1 bound {config.tol:g}, "
        "background = passage nodes"
    )
    return [
        Engine("qortex", lambda t: personalized_pagerank(walk, t, config), prep, note=note),
        Engine(
            "qortex_numpy",
            lambda t: personalized_pagerank(walk, t, numpy_config),
            prep,
            note="the same solve with numpy and scipy operations (PPRConfig(compiled=False))",
        ),
        Engine(
            "qortex_batched",
            lambda t: personalized_pagerank(walk, t, config),
            prep,
            True,
            note="all queries in one (n, q) call; per-query figures are the batch time / q",
        ),
    ]


def scipy_engine(adjacency: sp.csr_matrix) -> Engine:
    walk, prep = _timed(lambda: walk_matrix(adjacency))
    return Engine(
        "scipy_power", lambda t: scipy_power(walk, t), prep, note="float32, L1 change < 1e-7"
    )


def igraph_engine(adjacency: sp.csr_matrix) -> Engine:
    """An undirected weighted igraph built once; per query the prpack call HippoRAG 2 makes."""
    import igraph as ig

    def build():
        upper = sp.triu(adjacency, k=1, format="coo")
        graph = ig.Graph(
            n=adjacency.shape[0],
            edges=np.column_stack([upper.row, upper.col]).tolist(),
            directed=False,
        )
        graph.es["weight"] = upper.data.astype(np.float64).tolist()
        return graph

    graph, prep = _timed(build)
    vertices = range(adjacency.shape[0])

    def run(t: np.ndarray) -> np.ndarray:
        return np.asarray(
            graph.personalized_pagerank(
                vertices=vertices,
                damping=DAMPING,
                directed=False,
                weights="weight",
                reset=t,
                implementation="prpack",
            )
        )

    return Engine(
        "igraph_prpack", run, prep, note="graph built once; reset=numpy teleport, as HippoRAG 2"
    )


def networkx_engine(adjacency: sp.csr_matrix) -> Engine:
    import networkx as nx

    graph, prep = _timed(lambda: nx.from_scipy_sparse_array(adjacency))
    nodes = list(range(adjacency.shape[0]))

    def run(t: np.ndarray) -> np.ndarray:
        personal = {int(i): float(t[i]) for i in np.flatnonzero(t)}
        scores = nx.pagerank(graph, alpha=DAMPING, personalization=personal, weight="weight")
        return np.array([scores[i] for i in nodes])

    return Engine("networkx", run, prep, note="nx.pagerank(personalization=..., tol=1e-6 default)")


# -- measurement ---------------------------------------------------------------------------------
def rss_mb(field: str) -> float:
    """``VmRSS`` or ``VmHWM`` of this process in MB (0 where /proc is missing)."""
    try:
        for line in open("/proc/self/status"):
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def reset_peak() -> bool:
    """Reset this process's ``VmHWM`` to its current RSS; whether /proc allowed it."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")  # resets VmHWM to the current RSS
        return True
    except OSError:
        return False


def top_overlap(a: np.ndarray, b: np.ndarray, k: int = 20) -> float:
    """|top-k(a) & top-k(b)| / k."""
    k = min(k, a.size)
    return (
        len(
            set(np.argpartition(-a, k - 1)[:k].tolist())
            & set(np.argpartition(-b, k - 1)[:k].tolist())
        )
        / k
    )


@dataclass(frozen=True)
class Timings:
    """One timed pass of an engine over every query: scores (n, q), wall and CPU seconds per
    query (q,), and the peak RSS growth while it ran (None where it cannot be read)."""

    scores: np.ndarray
    wall: np.ndarray
    cpu: np.ndarray
    peak_mb: float | None


def time_queries(engine: Engine, teleports: np.ndarray, warmup: int = 1) -> Timings:
    """Run ``engine`` on every teleport column (after ``warmup`` untimed queries)."""
    q = teleports.shape[1]
    columns = [
        np.ascontiguousarray(teleports[:, j]) for j in range(q)
    ]  # as a retriever builds them
    for j in range(min(warmup, q)):
        engine.run(teleports[:, j : j + 1] if engine.batched else columns[j])
    rss0 = rss_mb("VmRSS")
    peak_ok = reset_peak()
    if engine.batched:
        t, c = time.perf_counter(), time.process_time()
        scores = engine.run(teleports)
        per, cpu = (
            np.full(q, (time.perf_counter() - t) / q),
            np.full(q, (time.process_time() - c) / q),
        )
    else:
        cols, per, cpu = [], np.zeros(q), np.zeros(q)
        for j in range(q):
            t, c = time.perf_counter(), time.process_time()
            cols.append(engine.run(columns[j]))
            per[j], cpu[j] = time.perf_counter() - t, time.process_time() - c
        scores = np.column_stack(cols)
    return Timings(scores, per, cpu, rss_mb("VmHWM") - rss0 if peak_ok else None)


def summary(engine: Engine, runs: list[Timings], exact: np.ndarray) -> dict:
    """Latency (p50, p95, qps over the queries of every run), CPU time, peak RSS growth and the
    accuracy of the first run against ``exact``.

    ``cpu_p50_ms`` is process CPU time (all threads), which other load on the machine inflates
    far less than wall-clock time.
    """
    per = np.concatenate([r.wall for r in runs])
    cpu = np.concatenate([r.cpu for r in runs])
    peaks = [r.peak_mb for r in runs if r.peak_mb is not None]
    scores = runs[0].scores / np.maximum(runs[0].scores.sum(axis=0), 1e-30)
    q = scores.shape[1]
    l1 = np.abs(scores - exact).sum(axis=0)
    return {
        "p50_ms": round(float(np.percentile(per, 50)) * 1000, 3),
        "p95_ms": round(float(np.percentile(per, 95)) * 1000, 3),
        "qps": round(per.size / float(per.sum()), 2),
        "cpu_p50_ms": round(float(np.percentile(cpu, 50)) * 1000, 3),
        "l1_error": float(l1.max()),
        "l1_error_mean": float(l1.mean()),
        "top20_overlap": round(
            float(np.mean([top_overlap(scores[:, j], exact[:, j]) for j in range(q)])), 4
        ),
        "peak_mem_mb": round(max(peaks), 1) if peaks else None,
        "prepare_s": round(engine.prepare_s, 3),
        "queries": q,
        "rounds": len(runs),
        "round_p50_ms": [round(float(np.percentile(r.wall, 50)) * 1000, 3) for r in runs],
        "note": engine.note,
    }


# -- memory traffic ------------------------------------------------------------------------------
def product_bytes(adjacency: sp.csr_matrix, columns: int = 1) -> int:
    """Bytes one sparse product ``A @ X`` must move at least: the CSR arrays once, X and the
    result once each (gathers that hit cache are not counted again)."""
    n = adjacency.shape[0]
    csr = adjacency.data.nbytes + adjacency.indices.nbytes + adjacency.indptr.nbytes
    return int(csr + 2 * n * 4 * columns)


def memory_traffic(
    adjacency: sp.csr_matrix,
    n_phrases: int,
    teleports: np.ndarray,
    config: PPRConfig,
    solve_cpu_ms: float,
    repeats: int = 20,
) -> dict:
    """Bytes read per qortex solve and the rate achieved, beside a plain SpMV loop.

    Products per solve come from the solver itself (one untimed solve per teleport); the plain
    loop is ``adjacency @ x`` ``repeats`` times on one float32 vector. Rates use CPU seconds
    (process time), which other load on a shared machine inflates less than wall time.
    """
    from qortex_core.query.ppr.cg import conjugate_gradient

    background = np.zeros(adjacency.shape[0], np.float32)
    background[n_phrases:] = 1.0
    walk = symmetric_walk(adjacency, background=background)
    products = []
    for j in range(teleports.shape[1]):
        t = teleports[:, j : j + 1] / max(float(teleports[:, j].sum()), 1e-30)  # (n, 1)
        _, k = conjugate_gradient(
            walk, t.astype(np.float32), config.damping, config.tol, config.max_iter, threads=1
        )
        products.append(k)
    x = np.random.default_rng(0).random(adjacency.shape[0]).astype(np.float32)  # (n,)
    adjacency @ x  # warm-up
    start = time.process_time()
    for _ in range(repeats):
        adjacency @ x
    spmv_s = (time.process_time() - start) / repeats
    per_product = product_bytes(adjacency)
    per_solve = float(np.mean(products)) * per_product
    return {
        "bytes_per_product": per_product,
        "products_per_solve_mean": round(float(np.mean(products)), 2),
        "products_per_solve_max": int(max(products)),
        "bytes_per_solve": int(per_solve),
        "solve_gb_s": round(per_solve / (solve_cpu_ms / 1000) / 1e9, 2) if solve_cpu_ms else None,
        "plain_spmv_cpu_ms": round(spmv_s * 1000, 3),
        "plain_spmv_gb_s": round(per_product / spmv_s / 1e9, 2) if spmv_s else None,
        "solve_vs_products_alone": round(
            solve_cpu_ms / (float(np.mean(products)) * spmv_s * 1000), 2
        )
        if spmv_s and solve_cpu_ms
        else None,
    }


# -- ratios ---------------------------------------------------------------------------------------
def speedups(engines: dict) -> dict[str, float]:
    """Speedups of ``qortex`` over each baseline (p50 over p50), and the compiled and batched
    solves' gains."""
    base = engines.get("qortex")
    out: dict[str, float] = {}
    if not base:
        return out
    for name in BASELINES:
        if name in engines and base["p50_ms"] > 0:
            out[ratio_name(name)] = round(engines[name]["p50_ms"] / base["p50_ms"], 2)
    if "qortex_numpy" in engines and base["p50_ms"] > 0:
        out["compiled_vs_numpy"] = round(engines["qortex_numpy"]["p50_ms"] / base["p50_ms"], 2)
    if "qortex_batched" in engines and base["qps"] > 0:
        out["batched_qps_gain"] = round(engines["qortex_batched"]["qps"] / base["qps"], 2)
    return out


BASELINES = ("igraph_prpack", "scipy_power", "networkx")


def ratio_name(baseline: str) -> str:
    """The report's key for the speedup over ``baseline``."""
    return f"speedup_vs_{baseline.split('_')[0]}"


def round_speedups(engines: dict) -> dict[str, dict]:
    """Each speedup of :func:`speedups` round by round (the p50 of each round's queries): the
    values, their median and range."""
    base = engines.get("qortex")
    out: dict[str, dict] = {}
    if not base:
        return out
    for name in BASELINES:
        if name not in engines:
            continue
        values = [
            round(theirs / ours, 2)
            for theirs, ours in zip(engines[name]["round_p50_ms"], base["round_p50_ms"])
            if ours > 0
        ]
        if values:
            out[ratio_name(name)] = {
                "values": values,
                "median": round(statistics.median(values), 2),
                "min": min(values),
                "max": max(values),
            }
    return out
