"""Evaluation, ablation and benchmarks (``pip install -e '.[bench]'``): recall on HippoRAG-format
datasets, the ablation tables, PPR and query benchmarks. Uses ``qortex_core``; the library never
imports this package.
"""
