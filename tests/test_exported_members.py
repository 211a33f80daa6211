"""The public surface of ``qortex_core`` (as httpx's tests/test_exported_members.py).

``__all__`` must list exactly the public names, sorted; every listed name must resolve to the
object its defining module holds. To export a new name, add it to ``qortex_core._EXPORTS``.
"""

from __future__ import annotations

import importlib
import inspect
import json
import subprocess
import sys

import qortex_core

AGENT_NAMES = {"open", "Memory", "Retriever", "RetrievalConfig", "QueryResult", "QortexError"}


def _eager_public_globals() -> list[str]:
    """Public globals of a freshly imported ``qortex_core`` (before any lazy name resolves)."""
    code = (
        "import inspect, json, qortex_core as q; print(json.dumps(sorted(n for n, v in "
        "vars(q).items() if not n.startswith('_') and not inspect.ismodule(v) and "
        "n != 'annotations')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def test_all_lists_exactly_the_public_names_sorted() -> None:
    assert qortex_core.__all__ == sorted(qortex_core.__all__, key=str.casefold)
    assert len(set(qortex_core.__all__)) == len(qortex_core.__all__)
    assert set(qortex_core.__all__) == set(qortex_core._EXPORTS)
    # nothing public is defined eagerly beside the lazy exports (it would be missing from
    # __all__), and every error a caller may catch is exported
    assert _eager_public_globals() == []
    errors = importlib.import_module("qortex_core.errors")
    catchable = {
        n
        for n, v in vars(errors).items()
        if inspect.isclass(v)
        and issubclass(v, errors.QortexError)
        and v.__module__ == errors.__name__
    }
    assert catchable <= set(qortex_core.__all__)
    assert AGENT_NAMES <= set(qortex_core.__all__)


def test_every_exported_name_is_its_defining_modules_object() -> None:
    """Each name is defined (not merely imported) in the module ``_EXPORTS`` names: checked on
    the object's own ``__module__`` and ``__name__``, not through ``_EXPORTS`` again."""
    for name in qortex_core.__all__:
        module, _, attribute = qortex_core._EXPORTS[name].partition(":")
        value = getattr(qortex_core, name)
        assert value.__module__ == module, name
        assert value.__name__ == (attribute or name), name


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
