"""Refs whose domain would be lost: named only in another ref's ``derived_from``.

Wire format v1 carries ids only in ``derived_from``: unless the ref is a task's or run's value
too, its domain (``ref(domain=...)``) never reaches the store, and q1 / q6 through that raw
file answer nothing. This module remembers such refs and, when a run ends, warns about those
that were never sent as a value. Bounded: a process names few domain refs.
"""

from __future__ import annotations

import os

from provkg.capture.context import current_workflow
from provkg.capture.report import report_once

__all__ = ["note_domain_sent", "note_domain_waiting", "report_unsent_domains"]

#: keys (id, else location) of refs whose domain went out in a task's or run's value, and of
#: refs with a domain named only in derived_from so far
_domains_sent: set[str] = set()
#: key -> (pid, id() of the run current when the ref was made, None: no run then)
_domains_waiting: dict[str, tuple[int, int | None]] = {}
_DOMAIN_KEYS_MAX = 10_000


def note_domain_sent(key: str) -> None:
    """The ref ``key``, which has a domain, goes out as a value: its domain is captured."""
    if len(_domains_sent) < _DOMAIN_KEYS_MAX:
        _domains_sent.add(key)


def note_domain_waiting(key: str) -> None:
    """The ref ``key``, which has a domain, is named in a ``derived_from``: unless it is also
    sent as a value before its run ends, :func:`report_unsent_domains` warns."""
    if key not in _domains_sent and len(_domains_waiting) < _DOMAIN_KEYS_MAX:
        run = current_workflow()
        _domains_waiting[key] = (os.getpid(), None if run is None else id(run))


def report_unsent_domains(run: object, *, last: bool) -> None:
    """Warn (once each) about refs with a domain named in ``derived_from`` but never sent as a
    value: their domain link is not captured. Called when ``run`` ends (in a forked child that
    continued it too), for the refs this process made while it was the current run (``last``:
    no run is active any more, so refs made outside any run too); another run ending meanwhile
    (nested, in another thread or a forked child) says nothing of them.
    Never raises."""
    try:
        mine, pid = id(run), os.getpid()
        for key, (made_in, owner) in list(_domains_waiting.items()):
            # a forked child inherits the parent's refs: they are the parent's to report
            if made_in != pid or owner != mine and not (last and owner is None):
                continue
            del _domains_waiting[key]
            if key not in _domains_sent:
                report_once(("ref-derived-domain", key), "capture.ref(derived_from=): the domain "
                            f"of {key!r} was not sent (derived_from carries ids only, and no task "
                            "used or generated that ref); use it in a task too, or link it "
                            "later: `provkg link ID IRI`")
    except Exception:  # a dict changed by another thread meanwhile: the warning is only advice
        pass
