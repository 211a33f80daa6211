"""The machine's own speed, timed beside each stage of the scale ladder.

On a shared machine the same code can run its stages 10-20 % faster in one ladder than in
another, and over one decade of corpus size a growth exponent then carries about +-0.1 of
the machine's drift, the size of the gap between n and n log n. So the ladder times a fixed
workload in its parent process between stages (no stage runs then): a Python loop (dict
inserts: the extraction stage's kind of work), a float32 matrix product (the synonym and
snapshot stages' kind) and random reads from a 128 MB array (a cache miss each: the kind the
graph and query stages wait on). Each is timed five times and the fastest kept: a shared
machine swings by up to 2x over a tenth of a second, so a median still carries that swing,
while the fastest of five says what the machine could do in that moment.

A stage's *box factor* is the geometric mean, over the workloads and over the calibrations
just before and just after it, of the workload's time over the ladder's first calibration;
its *calibrated seconds* are its seconds divided by that factor: what it would have taken
at the speed the ladder started with. Growth exponents of calibrated seconds compare code
with code; the raw exponents stay beside them. A factor from two brackets cannot see a
slow spell inside a long stage, only the machine before and after it.
"""

from __future__ import annotations

import math
import time

import numpy as np

WORKLOADS = ("python_s", "gemm_s", "gather_s")
_GATHER_FLOATS = 1 << 25  # 128 MB of float32: far past the last-level cache
_state: dict[str, np.ndarray] = {}


def _timed(fn, repeats: int = 5) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def _python() -> int:
    table: dict[str, int] = {}
    for i in range(200_000):
        table[f"k{i}"] = i
    return sum(table.values())


def _gemm() -> float:
    a, b = _state["gemm_a"], _state["gemm_b"]  # (4096, 64), (64, 4096)
    total = 0.0
    for _ in range(4):
        total += float((a @ b)[0, 0])  # (4096, 64) @ (64, 4096)
    return total


def _gather() -> float:
    return float(_state["array"][_state["rows"]].sum())  # (4M,) random reads


def calibrate() -> dict[str, float]:
    """Seconds of each fixed workload (fastest of 5) on this machine now."""
    if not _state:
        rng = np.random.default_rng(0)
        _state["array"] = rng.random(_GATHER_FLOATS, dtype=np.float32)
        _state["rows"] = rng.integers(0, _GATHER_FLOATS, 1 << 22)
        _state["gemm_a"] = rng.random((4096, 64), dtype=np.float32)
        _state["gemm_b"] = np.ascontiguousarray(rng.random((4096, 64), dtype=np.float32).T)
    return {
        "python_s": round(_timed(_python), 4),
        "gemm_s": round(_timed(_gemm), 4),
        "gather_s": round(_timed(_gather), 4),
    }


def box_factor(reference: dict[str, float], *calibrations: dict[str, float]) -> float:
    """Geometric mean of each workload's seconds over ``reference``'s, across
    ``calibrations``: 1.1 means the machine ran 10 % slower than at the reference."""
    logs = [
        math.log(c[w] / reference[w])
        for c in calibrations
        for w in WORKLOADS
        if c.get(w, 0) > 0 and reference.get(w, 0) > 0
    ]
    return round(math.exp(sum(logs) / len(logs)), 4) if logs else 1.0
