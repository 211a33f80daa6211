"""``qortex bench ppr`` and ``qortex bench query`` (issue: fast retrieval at scale)."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from qortex_cli.output import json_text

ENGINES = ("qortex", "qortex_numpy", "qortex_batched", "scipy_power", "igraph_prpack", "networkx")


def register(kinds: argparse._SubParsersAction) -> None:
    """Add the ``ppr`` and ``query`` benchmarks."""
    _register_ppr(kinds)
    _register_query(kinds)


def _register_ppr(kinds: argparse._SubParsersAction) -> None:
    ppr = kinds.add_parser("ppr", help="PPR engines on a synthetic HippoRAG-shaped graph")
    ppr.add_argument("--nodes", type=int, default=97_000)
    ppr.add_argument("--edges", type=int, default=1_400_000)
    ppr.add_argument("--queries", type=int, default=20)
    ppr.add_argument("--seed", type=int, default=0)
    ppr.add_argument(
        "--rounds",
        type=int,
        default=5,
        help="timed passes per engine, the engines taking turns (reversed every other round); "
        "latencies pool all rounds and each ratio is also given per round",
    )
    ppr.add_argument("--tol", type=float, default=1e-3, help="qortex's certified L1 error bound")
    ppr.add_argument(
        "--threads",
        type=int,
        default=1,
        help="threads per matrix product in qortex's solver, and the limit of every engine's "
        "OpenMP and BLAS thread pools while it is timed (igraph's prpack runs OpenMP loops)",
    )
    ppr.add_argument(
        "--engines",
        default=",".join(ENGINES),
        help="comma-separated subset of " + ",".join(ENGINES),
    )
    ppr.add_argument(
        "--order",
        choices=["hub_first", "as_generated"],
        default="hub_first",
        help="node order of the graph: hub_first (as snapshots are built) or as generated",
    )
    ppr.add_argument("--networkx-max-edges", type=int, default=200_000)
    ppr.add_argument(
        "--snapshot-home",
        help="also publish the graph here and measure a fresh process that loads it",
    )
    ppr.add_argument("--json", help="write the report here")
    ppr.set_defaults(func=cmd_bench_ppr)


def _register_query(kinds: argparse._SubParsersAction) -> None:
    query = kinds.add_parser(
        "query", help="end-to-end query latency and fast-vs-exact recall on a snapshot"
    )
    query.add_argument("--home", required=True)
    query.add_argument(
        "--queries", help="questions (HippoRAG JSON, gives recall) or text, one query a line"
    )
    query.add_argument("--limit", type=int, default=100)
    query.add_argument("--top-k", type=int, default=10)
    query.add_argument(
        "--ppr-tol", type=float, help="override the retriever's PPR tolerance (default: its config)"
    )
    query.add_argument(
        "--embed-threads",
        type=int,
        default=1,
        help="torch threads for the query embedding (0: torch's default); one short text "
        "embeds fastest on one thread, and far slower with two on a busy 2-core box",
    )
    query.add_argument("--json", help="write the report here")
    query.set_defaults(func=cmd_bench_query)


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _timed_rounds(engines: list, teleports, exact, threads: int, rounds: int) -> dict:
    """Every engine's ``ppr_bench.summary`` over ``rounds`` passes, the engines taking turns
    (reversed every other round), each pass with the engines' native thread pools capped at
    ``threads``: a baseline that ran OpenMP loops on both cores beside a one-thread qortex solve
    (igraph: 192 ms of CPU in 144 ms) would not be the same-threads comparison the ratio claims."""
    from threadpoolctl import threadpool_limits

    from qortex_bench import ppr_bench as pb

    runs: dict[str, list] = {e.name: [] for e in engines}
    for r in range(rounds):
        for engine in engines if r % 2 == 0 else engines[::-1]:
            _say(f"{engine.name}: round {r + 1}/{rounds}")
            with threadpool_limits(limits=threads):
                runs[engine.name].append(pb.time_queries(engine, teleports))
    return {e.name: pb.summary(e, runs[e.name], exact) for e in engines}


def _engines(names: list[str], graph, config, nx_max: int, skipped: dict) -> list:
    from qortex_bench import ppr_bench as pb

    out = []
    if {"qortex", "qortex_numpy", "qortex_batched"} & set(names):
        out += [
            e
            for e in pb.qortex_engines(graph.adjacency, graph.n_phrases, config)
            if e.name in names
        ]
    if "scipy_power" in names:
        out.append(pb.scipy_engine(graph.adjacency))
    if "igraph_prpack" in names:
        out.append(pb.igraph_engine(graph.adjacency))
    if "networkx" in names:
        if graph.n_edges > nx_max:
            skipped["networkx"] = (
                f"skipped: {graph.n_edges} edges > {nx_max} (it would not finish in reasonable "
                "time)"
            )
        else:
            out.append(pb.networkx_engine(graph.adjacency))
    return out


def cmd_bench_ppr(args: argparse.Namespace) -> int:
    from qortex_bench import ppr_bench as pb
    from qortex_core.errors import ConfigError
    from qortex_core.query.ppr.solve import PPRConfig

    names = [n.strip() for n in args.engines.split(",") if n.strip()]
    unknown = sorted(set(names) - set(ENGINES))
    if unknown or args.queries < 1 or args.rounds < 1:
        raise ConfigError(
            f"unknown engines {unknown}" if unknown else "--queries and --rounds must be at least 1"
        )
    graph, teleports = _graph(args)
    t = time.perf_counter()
    exact = pb.exact_pagerank(graph.adjacency, teleports)
    _say(f"exact: float64 power iteration to 1e-12 ({time.perf_counter() - t:.1f}s)")
    report: dict = {
        "nodes": graph.n_nodes,
        "edges": graph.n_edges,
        "phrases": graph.n_phrases,
        "queries": args.queries,
        "seed": args.seed,
        "damping": pb.DAMPING,
        "exact": "float64 power iteration, L1 change < 1e-12",
        "memory": "peak_mem_mb = growth of VmHWM (peak RSS, reset via /proc/self/clear_refs) "
        "over RSS while the timed queries ran",
        "engines": {},
        "skipped": {},
    }
    config = PPRConfig(tol=args.tol, threads=args.threads, push_min_nodes=0)  # the certified solve
    report["qortex_config"] = {
        "tol": config.tol,
        "threads": config.threads,
        "max_iter": config.max_iter,
    }
    report["engine_threads"] = args.threads
    engines = _engines(names, graph, config, args.networkx_max_edges, report["skipped"])
    for engine in engines:
        _say(f"{engine.name}: prepared in {engine.prepare_s:.2f}s")
    report["rounds"] = args.rounds
    report["engines"] = _timed_rounds(engines, teleports, exact, args.threads, args.rounds)
    if args.snapshot_home:
        report["snapshot"] = _snapshot(args.snapshot_home, graph, teleports, exact, config)
    if "qortex" in report["engines"]:
        report["memory_traffic"] = pb.memory_traffic(
            graph.adjacency,
            graph.n_phrases,
            teleports,
            config,
            report["engines"]["qortex"]["cpu_p50_ms"],
        )
    report["order"] = args.order
    report["ratios"] = pb.speedups(report["engines"])
    report["ratio_rounds"] = pb.round_speedups(report["engines"])
    _print_ppr(report)
    if args.json:
        Path(args.json).write_text(json_text(report, indent=2) + "\n")
    return 0


def _graph(args: argparse.Namespace):
    """The synthetic graph and teleports, in the node order ``--order`` asks for."""
    from qortex_bench.bench_graphs import synthetic_graph, synthetic_teleports
    from qortex_core.errors import ConfigError

    t = time.perf_counter()
    try:
        graph = synthetic_graph(args.nodes, args.edges, seed=args.seed)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    teleports = synthetic_teleports(graph, args.queries, seed=args.seed)
    if args.order == "hub_first":  # the same queries on the graph as a snapshot stores it
        graph, teleports = _hub_first(graph, teleports)
    _say(f"graph: {graph.n_nodes} nodes, {graph.n_edges} edges ({time.perf_counter() - t:.1f}s)")
    return graph, teleports


def _hub_first(graph, teleports):
    """The graph and teleports with nodes in :func:`hub_first_order` of their edge counts."""
    import numpy as np

    from qortex_bench.bench_graphs import SyntheticGraph
    from qortex_core.ingest.graph import hub_first_order, permute_symmetric

    order = hub_first_order(np.diff(graph.adjacency.indptr), graph.n_phrases)
    adjacency = permute_symmetric(graph.adjacency, order)
    adjacency.indices = adjacency.indices.astype(np.int32)
    if adjacency.nnz < np.iinfo(np.int32).max:
        adjacency.indptr = adjacency.indptr.astype(np.int32)
    return SyntheticGraph(adjacency, graph.n_phrases), np.ascontiguousarray(teleports[order])


def _snapshot(home: str, graph, teleports, exact, config) -> dict:
    import numpy as np

    from qortex_bench.ppr_bench import top_overlap
    from qortex_bench.ppr_snapshot_probe import publish_synthetic, run_probe

    path = publish_synthetic(home, graph)
    _say(f"snapshot: published {path}; probing a fresh process")
    probe, scores = run_probe(home, teleports, config.tol, config.threads)
    l1 = np.abs(scores - exact).sum(axis=0)
    probe.update(
        path=str(path),
        l1_error=float(l1.max()),
        top20_overlap=round(
            float(np.mean([top_overlap(scores[:, j], exact[:, j]) for j in range(exact.shape[1])])),
            4,
        ),
    )
    return probe


def _print_ppr(report: dict) -> None:
    print(f"nodes {report['nodes']}  edges {report['edges']}  queries {report['queries']}")
    print(
        f"{'engine':16}{'p50 ms':>10}{'p95 ms':>10}{'cpu p50':>9}{'qps':>9}{'L1 err':>10}{'top20':>7}{'peak MB':>9}"  # noqa: E501
    )
    for name, e in report["engines"].items():
        peak = "-" if e["peak_mem_mb"] is None else f"{e['peak_mem_mb']:.1f}"
        print(
            f"{name:16}{e['p50_ms']:>10.2f}{e['p95_ms']:>10.2f}{e['cpu_p50_ms']:>9.2f}{e['qps']:>9.1f}{e['l1_error']:>10.1e}"
            f"{e['top20_overlap']:>7.2f}{peak:>9}"
        )
    for name, why in report["skipped"].items():
        print(f"{name:16}{why}")
    if "snapshot" in report:
        s = report["snapshot"]
        print(
            f"snapshot process: loaded snapshot adds {s['snapshot_rss_mb']} MB RSS (process "
            f"{s['rss_after_queries_mb']} MB,"
            f" baseline {s['rss_baseline_mb']} MB, peak {s['peak_rss_mb']} MB; tables "
            f"{s['tables_anon_mb']} MB anon,"
            f" graph + PPR {s['graph_rss_mb']} MB),"
            f" p50 {s['p50_ms']} ms, L1 err {s['l1_error']:.1e}"
        )
    for name, value in report["ratios"].items():
        spread = report.get("ratio_rounds", {}).get(name)
        rounds = (
            f"  (per round: median {spread['median']}x, {spread['min']}x to {spread['max']}x "
            f"over {len(spread['values'])})"
            if spread
            else ""
        )
        print(f"{name}: {value}x{rounds}")
    if "memory_traffic" in report:
        m = report["memory_traffic"]
        print(
            f"qortex solve: {m['products_per_solve_mean']} products x {m['bytes_per_product']} B"
            f" = {m['bytes_per_solve'] / 1e6:.1f} MB, {m['solve_gb_s']} GB/s (CPU time);"
            f" plain SpMV {m['plain_spmv_cpu_ms']} ms, {m['plain_spmv_gb_s']} GB/s"
        )


def _read_queries(path: str | None, retriever, limit: int):
    """(texts, questions or None): a questions JSON gives recall; text gives one query a line."""
    from qortex_bench.datasets import load_questions
    from qortex_core.errors import DatasetError

    if path is None:
        return [f"What is {p['title']}?" for p in retriever.passages[:limit]], None
    if path.endswith((".json", ".jsonl")):
        questions = load_questions(path)[:limit]
        return [q.text for q in questions], questions
    try:
        texts = [
            line.strip()
            for line in Path(path).read_text(encoding="utf-8").splitlines()
            if line.strip()
        ]
    except OSError as exc:
        raise DatasetError(f"cannot read queries file {path}: {exc}") from None
    if not texts:
        raise DatasetError(f"queries file {path} has no queries")
    return texts[:limit], None


def cmd_bench_query(args: argparse.Namespace) -> int:
    from qortex_bench import ppr_query_bench as qb
    from qortex_core.query.retriever import Retriever

    t = time.perf_counter()
    retriever = Retriever.open(args.home)
    retriever.embedder.embed(["warm up"])
    if args.embed_threads > 0:
        import torch  # already imported by the embedder

        torch.set_num_threads(args.embed_threads)
    _say(f"retriever: opened and embedder warm in {time.perf_counter() - t:.1f}s")
    if args.ppr_tol is not None:
        import dataclasses

        retriever.config = dataclasses.replace(
            retriever.config, ppr=dataclasses.replace(retriever.config.ppr, tol=args.ppr_tol)
        )
    texts, questions = _read_queries(args.queries, retriever, args.limit)
    report: dict = {
        "home": args.home,
        "snapshot": retriever.snapshot.manifest.get("name"),
        "nodes": int(retriever.adjacency.shape[0]),
        "edges": int(retriever.adjacency.nnz // 2),
        "ppr": {"walk": type(retriever.walk).__name__, "tol": retriever.config.ppr.tol},
        "embed_threads": args.embed_threads,
        "assembly": "end to end minus embed, seed search and PPR",
        "latency": qb.latency(retriever, texts, ("dense", "hipporag"), args.top_k),
    }
    if questions:
        report["recall_fast_vs_exact"] = qb.recall_fast_vs_exact(retriever, questions)
    for mode, s in report["latency"].items():
        print(
            f"{mode:9} end-to-end p50 {s['end_to_end_p50_ms']:.2f} ms p95 "
            f"{s['end_to_end_p95_ms']:.2f} ms | "
            f"embed {s['embed_p50_ms']:.2f} seed {s['seed_p50_ms']:.2f} ppr {s['ppr_p50_ms']:.2f} "
            f"assembly {s['assembly_p50_ms']:.2f} (p50 ms)"
        )
    if questions:
        r = report["recall_fast_vs_exact"]
        print(
            f"recall fast {r['fast']}  exact {r['exact']}  delta {r['delta_points']}  "
            f"max PPR L1 {r['ppr_l1_error_max']:.1e}"
        )
    if args.json:
        Path(args.json).write_text(json_text(report, indent=2) + "\n")
    return 0
