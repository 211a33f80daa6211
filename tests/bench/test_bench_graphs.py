"""The synthetic HippoRAG-shaped graphs and teleports used by ``qortex bench ppr``."""

from __future__ import annotations

import numpy as np
import pytest

from qortex_bench.bench_graphs import synthetic_graph, synthetic_teleports


@pytest.mark.parametrize(("nodes", "edges"), [(50, 200), (1000, 8000), (3000, 2500)])
def test_requested_sizes_and_symmetric_matrix(nodes, edges):
    g = synthetic_graph(nodes, edges, seed=1)
    a = g.adjacency
    assert g.n_nodes == nodes and a.shape == (nodes, nodes)
    assert g.n_edges == edges and a.nnz == 2 * edges
    assert (a - a.T).count_nonzero() == 0
    assert a.diagonal().sum() == 0
    assert a.data.min() > 0 and a.dtype == np.float32
    assert 0 < g.n_phrases < nodes


def test_passages_link_only_to_phrases_and_degrees_are_heavy_tailed():
    g = synthetic_graph(4000, 40000, seed=2)
    a = g.adjacency
    passages = a[g.n_phrases :, g.n_phrases :]
    assert passages.nnz == 0  # no passage-passage edges, as in HippoRAG
    degree = np.diff(a.indptr)
    assert degree.max() > 10 * np.median(degree)


def test_same_seed_same_graph_other_seed_other_graph():
    a = synthetic_graph(500, 3000, seed=4).adjacency
    b = synthetic_graph(500, 3000, seed=4).adjacency
    c = synthetic_graph(500, 3000, seed=5).adjacency
    assert (a != b).nnz == 0
    assert (a != c).nnz > 0


def test_impossible_sizes_raise():
    with pytest.raises(ValueError):
        synthetic_graph(10, 1000)
    with pytest.raises(ValueError):
        synthetic_graph(2, 1)


def test_teleports_have_few_phrase_seeds_and_dense_passage_mass():
    g = synthetic_graph(2000, 15000, seed=6)
    t = synthetic_teleports(g, 5, seed=6, n_seeds=(2, 8))
    assert t.shape == (2000, 5) and t.dtype == np.float32 and t.min() >= 0
    seeds = (t[: g.n_phrases] > 0).sum(axis=0)
    assert ((seeds >= 2) & (seeds <= 8)).all()
    passage = t[g.n_phrases :]
    assert np.allclose(passage.max(axis=0), 0.05) and np.allclose(passage.min(axis=0), 0.0)
    assert ((passage > 0).mean(axis=0) > 0.9).all()


def test_bench_ppr_cli_reports_every_engine_against_the_exact_solution(tmp_path, capsys):
    import json

    from qortex_cli.main import main

    out = tmp_path / "ppr.json"
    code = main(
        [
            "bench",
            "ppr",
            "--nodes",
            "400",
            "--edges",
            "2500",
            "--queries",
            "3",
            "--tol",
            "1e-4",
            "--json",
            str(out),
            "--networkx-max-edges",
            "10000",
        ]
    )
    assert code == 0
    report = json.loads(out.read_text())
    assert (report["nodes"], report["edges"]) == (400, 2500)
    assert set(report["engines"]) == {
        "qortex",
        "qortex_numpy",
        "qortex_batched",
        "scipy_power",
        "igraph_prpack",
        "networkx",
    }
    for name in ("qortex", "qortex_numpy"):  # the certified tolerance holds on both paths
        assert report["engines"][name]["l1_error"] <= 1e-4
    assert "compiled_vs_numpy" in report["ratios"]
    assert report["engines"]["igraph_prpack"]["l1_error"] < 1e-5  # same PageRank definition as ours
    assert all(e["top20_overlap"] >= 0.9 for e in report["engines"].values())
    assert (
        "speedup_vs_igraph" in report["ratios"] and "speedup_vs_igraph" in capsys.readouterr().out
    )


def test_bench_ppr_cli_skips_networkx_above_its_edge_limit_and_rejects_bad_engines(
    tmp_path, capsys
):
    import json

    from qortex_cli.main import main

    out = tmp_path / "ppr.json"
    assert (
        main(
            [
                "bench",
                "ppr",
                "--nodes",
                "300",
                "--edges",
                "1500",
                "--queries",
                "2",
                "--engines",
                "qortex,networkx",
                "--networkx-max-edges",
                "1000",
                "--json",
                str(out),
            ]
        )
        == 0
    )
    report = json.loads(out.read_text())
    assert set(report["engines"]) == {"qortex"} and "networkx" in report["skipped"]
    assert (
        main(["bench", "ppr", "--nodes", "300", "--edges", "1500", "--engines", "qortex,nope"]) == 2
    )
    assert "nope" in capsys.readouterr().err


def test_bench_ppr_times_every_engine_with_its_thread_pools_at_the_thread_limit(
    tmp_path, monkeypatch
):
    import json

    from threadpoolctl import threadpool_info

    from qortex_bench import ppr_bench as pb
    from qortex_cli.commands.bench import ppr as bench_ppr
    from qortex_cli.main import main

    seen: list[int] = []
    engines = bench_ppr._engines

    def watched(*args):
        out = []
        for e in engines(*args):

            def run(t, _run=e.run):
                seen.extend(pool["num_threads"] for pool in threadpool_info())
                return _run(t)

            out.append(pb.Engine(e.name, run, e.prepare_s, e.batched, e.note))
        return out

    monkeypatch.setattr(bench_ppr, "_engines", watched)
    import igraph  # noqa: F401  (its OpenMP runtime loaded, as when igraph is timed)

    before = {p["filepath"]: p["num_threads"] for p in threadpool_info()}
    out = tmp_path / "ppr.json"
    argv = ["bench", "ppr", "--nodes", "300", "--edges", "1500", "--queries", "2"]
    assert main([*argv, "--engines", "qortex,igraph_prpack", "--json", str(out)]) == 0
    assert seen and set(seen) == {1}  # BLAS and OpenMP pools capped while timed
    assert json.loads(out.read_text())["engine_threads"] == 1
    after = {p["filepath"]: p["num_threads"] for p in threadpool_info()}
    assert before and all(after[path] == n for path, n in before.items())  # restored


def test_bench_ppr_rounds_take_turns_and_report_each_rounds_ratio(tmp_path, monkeypatch, capsys):
    import json

    from qortex_bench import ppr_bench as pb
    from qortex_cli.commands.bench import ppr as bench_ppr
    from qortex_cli.main import main

    calls: list[str] = []
    engines = bench_ppr._engines

    def watched(*args):
        out = []
        for e in engines(*args):

            def run(t, _run=e.run, _name=e.name):
                calls.append(_name)
                return _run(t)

            out.append(pb.Engine(e.name, run, e.prepare_s, e.batched, e.note))
        return out

    monkeypatch.setattr(bench_ppr, "_engines", watched)
    out = tmp_path / "ppr.json"
    argv = ["bench", "ppr", "--nodes", "300", "--edges", "1500", "--queries", "2"]
    argv += ["--engines", "qortex,igraph_prpack", "--rounds", "3", "--json", str(out)]
    assert main(argv) == 0
    # each pass: 1 warm-up + 2 timed queries; the order turns round every other round
    passes = [calls[i] for i in range(0, len(calls), 3)]
    assert passes == [
        "qortex",
        "igraph_prpack",
        "igraph_prpack",
        "qortex",
        "qortex",
        "igraph_prpack",
    ]
    report = json.loads(out.read_text())
    ours, theirs = (report["engines"][n]["round_p50_ms"] for n in ("qortex", "igraph_prpack"))
    assert len(ours) == len(theirs) == 3 and report["rounds"] == 3
    spread = report["ratio_rounds"]["speedup_vs_igraph"]
    assert spread["values"] == [round(b / a, 2) for a, b in zip(ours, theirs)]
    assert spread["min"] <= spread["median"] <= spread["max"]
    assert "per round: median" in capsys.readouterr().out
    assert main([*argv[:-4], "--rounds", "0"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--rounds must be at least 1" in err[0]


def test_summary_pools_the_queries_of_every_round():
    from qortex_bench import ppr_bench as pb

    engine = pb.Engine("x", lambda t: t, 0.0)
    scores = np.ones((4, 3), np.float32)
    exact = scores / scores.sum(axis=0)
    runs = [
        pb.Timings(scores, np.array([0.001, 0.002, 0.003]), np.zeros(3), None),
        pb.Timings(scores, np.array([0.010, 0.020, 0.030]), np.zeros(3), 5.0),
    ]
    out = pb.summary(engine, runs, exact)
    assert out["p50_ms"] == 6.5  # the median of all six queries, not of either round
    assert out["round_p50_ms"] == [2.0, 20.0] and out["rounds"] == 2
    assert out["qps"] == round(6 / 0.066, 2) and out["peak_mem_mb"] == 5.0
