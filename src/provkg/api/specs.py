"""The server's registry of prospective specs, kept next to the queue so it survives restarts.

Specs are few and small: the registry is one JSON file (workflow name -> source
text) rewritten atomically. Names are dictionary keys, never file names, so no
request can reach a path of its choosing.
"""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path
from typing import Any

import orjson

from provkg.api.errors import QueueUnavailable
from provkg.errors import BadSpec
from provkg.service.registration import spec_data
from provkg.spec import Spec, parse_spec

__all__ = ["SpecRegistry"]

log = logging.getLogger("provkg.api")


class SpecRegistry:
    """Specs by workflow name, persisted to ``directory/specs.json``."""

    def __init__(self, directory: str | os.PathLike[str]):
        self._path = Path(directory) / "specs.json"
        self._lock = threading.Lock()
        self._texts: dict[str, str] = {}
        self._specs: dict[str, Spec] = {}

    def load(self) -> list[Spec]:
        """Read the saved specs; one that no longer validates (saved by another provkg
        version) is skipped with a warning, so the store's copy can take its place."""
        if self._path.is_file():
            self._texts = orjson.loads(self._path.read_bytes())
        for name, text in list(self._texts.items()):
            try:
                self._specs[name] = parse_spec(text, source=f"saved spec {name}")
            except BadSpec as exc:
                log.warning("skipping the saved spec of %s: %s", name, exc)
                del self._texts[name]
        return list(self._specs.values())

    def add(self, text: str) -> Spec:
        """Validate and save a spec (replacing one with the same workflow name).

        Raises:
            BadSpec: naming line and field of each problem.
        """
        return self.replace(text)[0]

    def replace(self, text: str) -> tuple[Spec, tuple[str, Spec] | None]:
        """:meth:`add`, also returning what the workflow had before (for :meth:`restore`)."""
        # YAML aliases are accepted as the CLI accepts them: parse_spec refuses a spec that
        # would expand past MAX_SPEC_NODES values before building it (an alias bomb)
        spec = parse_spec(text, source="request body", echo=False)  # an API error never echoes the body
        with self._lock:
            previous = ((self._texts[spec.workflow], self._specs[spec.workflow])
                        if spec.workflow in self._texts else None)
            self._save({**self._texts, spec.workflow: text}, {**self._specs, spec.workflow: spec})
        return spec, previous

    def put(self, spec: Spec, text: str) -> None:
        """Save a spec validated already (read back from the store, or a file ``load_spec``
        read) with its document ``text``; not parsed again: the store's documents spell out
        every default, and a large spec would then fail the size check it passed as written."""
        with self._lock:
            self._save({**self._texts, spec.workflow: text}, {**self._specs, spec.workflow: spec})

    def restore(self, workflow: str, previous: tuple[str, Spec] | None) -> None:
        """Put back what ``workflow`` had before :meth:`replace` (None: nothing), when the
        store refused the new spec's triples."""
        with self._lock:
            texts, specs = dict(self._texts), dict(self._specs)
            if previous is None:
                texts.pop(workflow, None)
                specs.pop(workflow, None)
            else:
                texts[workflow], specs[workflow] = previous
            self._save(texts, specs)

    def _save(self, texts: dict[str, str], specs: dict[str, Spec]) -> None:
        tmp = self._path.with_suffix(".tmp")
        try:
            self._path.parent.mkdir(parents=True, exist_ok=True)
            with open(tmp, "wb") as out:
                out.write(orjson.dumps(texts))
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp, self._path)
        except OSError as exc:  # a full disk: 503, as for events, not a 500
            raise QueueUnavailable(f"the spec registry in {self._path.parent} cannot be "
                                   f"written: {exc.strerror or exc}") from exc
        self._texts, self._specs = texts, specs

    def specs(self) -> dict[str, Spec]:
        """Workflow name -> Spec (a snapshot: safe to use while specs are added)."""
        return self._specs

    def describe(self) -> list[dict[str, Any]]:
        """The specs as JSON-ready dicts, by workflow name."""
        return [spec_data(self._specs[name]) for name in sorted(self._specs)]
