"""A small corpus for the memory-loop tests, ingested with the real stage functions."""

from __future__ import annotations

from pathlib import Path

from qortex_core.ingest import stages as index
from qortex_core.ingest.extract import OfflineExtractor
from qortex_core.storage.model import Passage

PUMPS = [
    (
        "Orion Pump Manual",
        "The Orion Pump is serviced by the Delta Crew every spring. Operators should never run the Orion Pump dry.",
    ),
    (
        "Orion Pump Failures",
        "The Orion Pump failed at Cedar Ridge in March. Engineers at Cedar Ridge replaced the Orion Pump seal.",
    ),
    (
        "Orion Pump Vendor",
        "Kestrel Industries builds the Orion Pump in Lisbon. Kestrel Industries also builds the Vega Valve.",
    ),
    ("Orion Pump History", "The Orion Pump was designed by Mara Quint at Halden Works in 1998."),
    (
        "Vega Valve Notes",
        "The Vega Valve regulates the Orion Pump outflow at Cedar Ridge. Technicians must always check the Vega Valve first.",
    ),
    (
        "Cedar Ridge Station",
        "Cedar Ridge Station sits near Lake Amber. The Delta Crew is based at Cedar Ridge Station.",
    ),
]
KITCHEN = [
    (
        "Saffron Rice",
        "Saffron Rice comes from Valencia. Cooks should always rinse Saffron Rice before cooking.",
    ),
    (
        "Amber Bread",
        "Amber Bread is baked in Tilburg by the Meyer Bakery. Bakers prefer Rye Flour for Amber Bread.",
    ),
    ("Tilburg Market", "The Tilburg Market sells Amber Bread and Saffron Rice every Saturday."),
]


def passages(rows: list[tuple[str, str]], domain: str) -> list[Passage]:
    return [Passage(text=text, title=title, doc_id=title, domain=domain) for title, text in rows]


def corpus() -> list[Passage]:
    """Pump passages in domain ``engineering``, kitchen passages in ``kitchen``."""
    return passages(PUMPS, "engineering") + passages(KITCHEN, "kitchen")


def ingest(home: str | Path, rows: list[Passage], embedder) -> Path:
    """Chunks -> offline extraction -> embeddings -> synonyms -> snapshot under ``home``."""
    from qortex_core.storage.store import LanceStore

    return index.build_index(LanceStore.open(home), home, rows, OfflineExtractor(), embedder)
