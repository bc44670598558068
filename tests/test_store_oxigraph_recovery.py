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


def test_a_reopen_that_fails_is_tried_again_by_the_next_write(tmp_path: Path, monkeypatch) -> None:
    import pyoxigraph as ox

    from provkg.store import oxigraph_store

    with open_store(f"oxigraph:{tmp_path / 's'}") as store:
        store.add([T])
        real = ox.Store
        attempts = []

        def refusing(*args, **kwargs):  # the disk still failing when it is opened again
            attempts.append(args)
            if len(attempts) == 1:
                raise OSError(5, "IO error: still failing")
            return real(*args, **kwargs)

        monkeypatch.setattr(oxigraph_store.ox, "Store", refusing)
        with pytest.raises(StoreError):
            store._write(_fail(5))
        with pytest.raises(StoreError, match="could not be opened again yet"):
            store.add([U])  # the first attempt to reopen fails
        store.add([U])  # the next one succeeds
        assert len(attempts) == 2 and store.count() == 2
