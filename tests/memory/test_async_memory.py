"""``qortex_core.open_async``: the memory API as coroutines that leave the event loop free
(a real LanceDB home, a hashing embedder: the model is not the point here)."""

from __future__ import annotations

import asyncio
import gc
import inspect
import time
from pathlib import Path

import pytest

import qortex_core
from qortex_core.embed import make_embedder
from qortex_core.errors import RecordError

METHODS = (
    "remember", "remember_many", "get", "list", "update", "forget", "history", "search",
    "feedback", "neighbors", "path", "entity",
)  # fmt: skip


def _text(n: int) -> str:
    return f"Vessel Zq{n}x carried {n} crates of blue widgets to depot Kel{n}."


async def _heartbeat(stop: asyncio.Event, gaps: list[float]) -> None:
    """Tick every 5 ms until ``stop``; record the time between ticks."""
    last = time.perf_counter()
    while not stop.is_set():
        await asyncio.sleep(0.005)
        now = time.perf_counter()
        gaps.append(now - last)
        last = now


async def _fifty_calls(home: Path) -> tuple[list, list, list[float], float]:
    mem = qortex_core.open_async(home, embedder=make_embedder("hash:64"))
    async with mem:
        earlier = await mem.remember_many([_text(n) for n in range(100, 110)])
        # A whole test session's heap holds millions of objects; a full collection of it stops
        # every thread for half a second, which is the interpreter's pause, not the memory's:
        # move what exists now out of the collector's reach for the measured window.
        gc.collect()
        gc.freeze()
        try:
            stop, gaps = asyncio.Event(), []
            beat = asyncio.create_task(_heartbeat(stop, gaps))
            await asyncio.sleep(0.02)  # the heartbeat is ticking
            start = time.perf_counter()
            calls = (
                [mem.remember(_text(n), domain="depots") for n in range(30)]
                + [mem.search(r.text, top_k=3) for r in earlier]
                + [mem.get(r.id) for r in earlier]
            )
            results = await asyncio.gather(*calls)
            elapsed = time.perf_counter() - start
            stop.set()
            await beat
        finally:
            gc.unfreeze()
        listed = await mem.list(limit=100)
    return earlier, results, gaps, elapsed, listed


def test_fifty_concurrent_calls_leave_the_event_loop_ticking(tmp_path: Path) -> None:
    earlier, results, gaps, elapsed, listed = asyncio.run(_fifty_calls(tmp_path / "home"))
    written, found, got = results[:30], results[30:40], results[40:]
    assert [r.text for r in written] == [_text(n) for n in range(30)]
    assert all(r.domain == "depots" and r.id.startswith("m_") for r in written)
    assert [res.passages[0].id for res in found] == [r.id for r in earlier]
    assert [(r.id, r.text) for r in got] == [(r.id, r.text) for r in earlier]
    assert {r.id for r in listed} == {r.id for r in earlier + written}
    # a blocked loop would not tick at all while the 50 calls ran (one gap ~ the whole gather)
    assert len(gaps) > 20
    assert max(gaps) < max(0.25, elapsed / 5), (max(gaps), elapsed)


def test_async_memory_offers_every_method_as_a_coroutine(tmp_path: Path) -> None:
    assert qortex_core.AsyncMemory is qortex_core.open_async(tmp_path / "h").__class__
    for name in METHODS:
        assert hasattr(qortex_core.Memory, name)
        assert inspect.iscoroutinefunction(getattr(qortex_core.AsyncMemory, name)), name


def test_errors_and_revisions_come_back_through_await(tmp_path: Path) -> None:
    async def run() -> tuple:
        async with qortex_core.open_async(tmp_path / "h", embedder=make_embedder("hash:64")) as m:
            first = await m.remember("The Vega Valve is checked weekly.")
            second = await m.update(first.id, "The Vega Valve is checked daily.")
            gone = await m.forget(first.id)
            history = await m.history(first.id)
            with pytest.raises(RecordError):
                await m.get("m_0000000000000000")
            return second, gone, history

    second, gone, history = asyncio.run(run())
    assert second.revision == 2 and gone.forgotten
    assert [h.op for h in history] == ["remember", "update", "forget"]
