"""The public surface of ``qortex_core`` (as httpx's tests/test_exported_members.py).

``__all__`` must list exactly the public names, sorted; every listed name must resolve to the
object its defining module holds. To export a new name, add it to ``qortex_core._EXPORTS``.
"""

from __future__ import annotations

import importlib
import inspect

import qortex_core

AGENT_NAMES = {"open", "Memory", "Retriever", "RetrievalConfig", "QueryResult", "QortexError"}


def public_names() -> set[str]:
    """Names ``qortex_core`` offers: its lazy exports plus any public global it defines itself."""
    own = {
        name
        for name, value in vars(qortex_core).items()
        if not name.startswith("_") and not inspect.ismodule(value) and name != "annotations"
    }
    return own | set(qortex_core._EXPORTS)


def test_all_lists_exactly_the_public_names_sorted() -> None:
    assert qortex_core.__all__ == sorted(public_names(), key=str.casefold)
    assert AGENT_NAMES <= set(qortex_core.__all__)


def test_every_exported_name_is_its_defining_modules_object() -> None:
    for name in qortex_core.__all__:
        module, _, attribute = qortex_core._EXPORTS[name].partition(":")
        assert getattr(qortex_core, name) is getattr(
            importlib.import_module(module), attribute or name
        )


def test_error_classes_share_one_base() -> None:
    errors = [getattr(qortex_core, n) for n in qortex_core.__all__ if n.endswith("Error")]
    assert errors and all(issubclass(e, qortex_core.QortexError) for e in errors)


def test_unknown_name_is_an_attribute_error() -> None:
    try:
        qortex_core.NoSuchThing  # noqa: B018
    except AttributeError as exc:
        assert "NoSuchThing" in str(exc)
    else:
        raise AssertionError("qortex_core.NoSuchThing resolved")
