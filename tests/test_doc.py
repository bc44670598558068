"""The examples in provkg's docstrings run, so the documentation cannot drift from the code."""

from __future__ import annotations

import doctest
import importlib
import os
import pkgutil

import pytest

import provkg

# provkg.integrations.keras imports Keras, whose default backend (TensorFlow) is not what the
# test environment installs: torch is, as for tests/test_integration_keras.py
os.environ.setdefault("KERAS_BACKEND", "torch")

# modules whose import starts or needs something a doctest should not (servers, the demo's data)
_SKIP_PREFIXES = ("provkg.demo", "provkg.bench", "provkg.api.sparql_worker")


def _modules() -> list[str]:
    names = []
    for info in pkgutil.walk_packages(provkg.__path__, "provkg."):
        if not info.name.startswith(_SKIP_PREFIXES):
            names.append(info.name)
    return sorted(names)


@pytest.mark.parametrize("name", _modules())
def test_docstring_examples(name: str) -> None:
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0, f"{result.failed} docstring example(s) failed in {name}"


def test_the_core_modules_have_examples() -> None:
    """The public building blocks carry at least one runnable example each."""
    for name in ("provkg.term", "provkg.store.oxigraph_store"):
        finder = doctest.DocTestFinder()
        examples = sum(len(t.examples) for t in finder.find(importlib.import_module(name)))
        assert examples > 0, name
