"""Embedded Oxigraph after a failed write: RocksDB refuses every later write until the
database is opened again, so the store reopens itself and the next attempt can succeed."""

from __future__ import annotations

from pathlib import Path

import pytest

from provkg.errors import StoreError
from provkg.store import open_store

T = ("<http://ex.org/a>", "<http://ex.org/p>", '"1"')
U = ("<http://ex.org/b>", "<http://ex.org/p>", '"2"')


def _fail(errno: int = 28):
    def action():
        raise OSError(errno, "IO error: No space left on device")
    return action


def test_a_failed_write_reopens_the_store_and_keeps_what_it_held(tmp_path: Path, caplog) -> None:
    # found by black-box testing: after the store's disk filled up and was freed, the server
    # retried for ever with the old error; only a restart helped
    with open_store(f"oxigraph:{tmp_path / 's'}") as store:
        store.add([T])
        with pytest.raises(StoreError, match="No space left"):
            store._write(_fail())
        store.add([U])
        assert "reopened the store" in caplog.text
        assert store.count() == 2
    with open_store(f"oxigraph:{tmp_path / 's'}") as store:
        assert store.count() == 2


def test_while_it_cannot_be_reopened_reads_go_on_and_the_next_write_tries_again(
        tmp_path: Path, monkeypatch) -> None:
    # found by black-box testing: while the disk stayed full, canned queries answered 503
    # (the handle was dropped at once), where before they answered from the stored data
    import pyoxigraph as ox

    from provkg.store import oxigraph_store

    with open_store(f"oxigraph:{tmp_path / 's'}") as store:
        store.add([T])
        real = ox.Store
        attempts = []

        class Refusing:  # the disk still full when the store is opened for writing again
            read_only = staticmethod(real.read_only)

            def __new__(cls, *args, **kwargs):
                attempts.append(args)
                if len(attempts) == 1:
                    raise OSError(28, "IO error: No space left on device")
                return real(*args, **kwargs)

        monkeypatch.setattr(oxigraph_store.ox, "Store", Refusing)
        with pytest.raises(StoreError):
            store._write(_fail())
        assert store.count() == 1  # reads go on with the handle that failed the write
        with pytest.raises(StoreError, match="cannot be opened for writing yet"):
            store.add([U])
        assert store.count() == 1 and store.select("SELECT ?o WHERE { ?s ?p ?o }").rows == [["1"]]
        store.add([U])  # the next write tries again, and succeeds
        assert len(attempts) == 2 and store.count() == 2


def test_closing_while_it_cannot_be_reopened_loses_nothing_and_raises_nothing(tmp_path: Path, monkeypatch) -> None:
    # found by black-box testing: SIGTERM on a full disk ended in a traceback (flush of the
    # read-only stand-in) and "Application shutdown failed"
    import pyoxigraph as ox

    from provkg.store import oxigraph_store

    store = open_store(f"oxigraph:{tmp_path / 's'}")
    store.add([T])
    real = ox.Store

    class Refusing:
        read_only = staticmethod(real.read_only)

        def __new__(cls, *args, **kwargs):
            raise OSError(28, "IO error: No space left on device")

    monkeypatch.setattr(oxigraph_store.ox, "Store", Refusing)
    with pytest.raises(StoreError):
        store._write(_fail())
    with pytest.raises(StoreError):
        store.add([U])
    store.close()
    monkeypatch.setattr(oxigraph_store.ox, "Store", real)
    with open_store(f"oxigraph:{tmp_path / 's'}") as again:
        assert again.count() == 1
