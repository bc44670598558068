"""Specs implied by what events say: for a workflow without a written spec.

Events may carry their roles (a task begin's ``kind`` and ``granularity``, a value's ``role``,
a workflow begin's ``phase``: what the framework callbacks and ``wf.task(..., kind=...)``
send). An ingest session keeps, per workflow without a written spec, the spec those facts
imply (:func:`provkg.spec.infer.infer_specs` with ``guess=False``: nothing is read from
names), registers it before the events that need it are mapped, and grows it when later
events say more. A spec a user wrote always wins: it is never changed, and its workflow's
events are mapped with it alone. A captured spec is told apart by its description
(:data:`CAPTURED`), so later sessions and servers grow it too.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from provkg.spec import Spec
from provkg.spec.infer import infer_specs, merge_specs

__all__ = ["CAPTURED", "CapturedSpecs", "is_captured"]

#: the description of a spec provkg registered from the roles a workflow's events carry
CAPTURED = "captured: implied by the kinds and roles the workflow's events carry"
#: task ids -> transformation kept to name the parents of later sections (bounded)
_MAX_TASKS = 200_000


def is_captured(spec: Spec | None) -> bool:
    """Whether ``spec`` is one provkg registered from captured roles (and may grow)."""
    return spec is not None and spec.description == CAPTURED


def _says_roles(e: Mapping[str, Any]) -> bool:
    """Whether ``e`` carries a kind, granularity, phase or value role (plain loops: this runs
    for every event of a workflow without a written spec)."""
    if "kind" in e or "granularity" in e or "phase" in e:
        return True
    for key in ("used", "generated"):
        values = e.get(key)
        if values:
            for v in values:
                if type(v) is dict and "role" in v:
                    return True
    return False


def _key(e: Mapping[str, Any]) -> tuple[Any, ...]:
    """What of ``e`` a spec holds: seen once, the same facts again imply nothing new."""
    values = tuple((key, v.get("name"), v.get("role")) for key in ("used", "generated")
                   for v in e.get(key) or () if isinstance(v, Mapping) and "role" in v)
    return (e.get("workflow") or e.get("workflow_id"), e.get("transformation"), e.get("kind"),
            e.get("granularity"), e.get("phase"), e.get("parent") is not None, values)


class CapturedSpecs:
    """The captured specs of one ingest session (see the module's docstring)."""

    def __init__(self, stored: Callable[[], Mapping[str, Spec]]) -> None:
        """``stored``: the specs the store holds (asked once, when a workflow first says a role
        and the session has no spec for it: a spec an earlier session registered is kept)."""
        self._seen: set[tuple[Any, ...]] = set()
        self._transformation_of: dict[str, str] = {}
        self._stored = stored
        self._stored_specs: Mapping[str, Spec] | None = None
        self._asked: set[str] = set()
        self._adopted: dict[str, Spec] = {}
        #: runs seen (their workflow asked for), and those whose workflow has a written spec
        self._asked_runs: set[Any] = set()
        self._settled: set[Any] = set()

    def implied(self, batch: list[dict[str, Any]], runs: Mapping[str, str],
                specs: Mapping[str, Spec]) -> list[tuple[Spec, bool]]:
        """The specs the session is to map ``batch`` with, each with whether to register it
        first: new or grown captured specs of workflows whose spec is missing or captured,
        and a spec the store holds that the session lacked (registered already: False).
        ``runs``: run id -> workflow of the runs seen so far; ``specs``: the session's."""
        out: list[tuple[Spec, bool]] = []
        said = []
        for e in batch:
            run = e["id"] if e.get("type") == "workflow" else e.get("workflow_id")
            if run in self._settled:  # its workflow's spec is written: nothing to infer
                continue
            if run not in self._asked_runs:
                name = e["workflow"] if e.get("type") == "workflow" else (
                    runs.get(run) if isinstance(run, str) else None)
                if name is not None:  # a run of a workflow not known yet waits for its event
                    self._asked_runs.add(run)
                    held = specs.get(name) or self._adopt(name, out)
                    if held is not None and not is_captured(held):
                        self._settled.add(run)
                        continue
            parent = e.get("parent")
            if _says_roles(e) or (parent is not None and parent in self._transformation_of):
                if e.get("type") == "task" and e.get("event") == "begin":
                    self._note_task(e)
                key = _key(e)
                if key not in self._seen:
                    self._seen.add(key)
                    said.append(e)
        if not said:
            return out
        said += [e for e in batch if e.get("type") == "workflow"]
        for name, found in infer_specs(said, guess=False, runs=runs,
                                       transformation_of=self._transformation_of).items():
            held = specs.get(name)
            if held is None:
                held = self._stored_spec(name)
                if held is not None and not is_captured(held):
                    out.append((held, False))  # a written spec the store holds wins
                    continue
            if held is not None and not is_captured(held):
                continue  # a written spec wins
            grown = found.spec if held is None else merge_specs(held, found.spec)
            grown = Spec.model_validate({**grown.model_dump(), "description": CAPTURED})
            if held is None or grown != held:
                out.append((grown, True))
            elif held is not specs.get(name):
                out.append((held, False))
        return out

    def _adopt(self, name: str, out: list[tuple[Spec, bool]]) -> Spec | None:
        """The spec the store holds for ``name`` when the session has none (asked once per
        workflow), added to ``out`` to map with: what earlier sessions registered is kept."""
        if name in self._asked:
            return self._adopted.get(name)
        self._asked.add(name)
        held = self._stored_spec(name)
        if held is not None:
            self._adopted[name] = held
            out.append((held, False))
        return held

    def _stored_spec(self, name: str) -> Spec | None:
        if self._stored_specs is None or name not in self._stored_specs:
            self._stored_specs = self._stored()  # asked again for a workflow not seen before
        return self._stored_specs.get(name)

    def _note_task(self, e: Mapping[str, Any]) -> None:
        if len(self._transformation_of) >= _MAX_TASKS:
            self._transformation_of.clear()  # parents begin shortly before their sections
        if isinstance(e.get("transformation"), str):
            self._transformation_of[e["id"]] = e["transformation"]
