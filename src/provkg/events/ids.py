"""Stable ids of captured values: the id the client gave, else the location, else one derived
from the task and the value's name (design decision S4). The mappers mint value nodes from
these, so one value keeps one node however often it is ingested."""

from __future__ import annotations

from provkg.events.models import Value
from provkg.term import location_form

__all__ = ["default_value_id", "value_id"]


def default_value_id(task_id: str, name: str, *, used: bool, run: bool = False) -> str:
    """The id of a value the client sent without one (design decision S4): the task id, then
    ``used/`` for a value the task used, then the name; a value of a workflow run itself
    (``run=True``, ``task_id`` its run id) under ``run/``. Different (task or run, name, side)
    never give the same id:

    * a '/' or '%' in the name is percent-encoded, so task ``job`` generating ``train/loss``
      and task ``job/train`` generating ``loss`` stay two values;
    * in the task id, '%' is encoded and a last segment ``used`` is written ``%75sed``, so
      task ``job/used`` generating ``lr`` and task ``job`` using ``lr`` stay two values;
    * a first segment ``run`` of a task id is written ``%72un``, so run ``exp.1`` and the task
      ``exp.1`` of run ``exp`` (the capture library's ids) keep their values apart;
    * a ':' in the first segment of a task id is written ``%3A``, so a derived id never reads
      as a URI: task ``s3://bucket/job`` generating ``model`` and a value at the location
      ``s3://bucket/job/model`` (whose id is that location) stay two values.

    >>> default_value_id("job", "train/loss", used=False), default_value_id("t", "lr", used=True)
    ('job/train%2Floss', 't/used/lr')
    >>> default_value_id("job/used", "lr", used=False)
    'job/%75sed/lr'
    >>> default_value_id("exp.1", "lr", used=True, run=True), default_value_id("run/x", "lr", used=True)
    ('run/exp.1/used/lr', '%72un/x/used/lr')
    >>> default_value_id("s3://bucket/job", "model", used=False)
    's3%3A//bucket/job/model'
    """
    if "/" in name or "%" in name:
        name = name.replace("%", "%25").replace("/", "%2F")
    if "%" in task_id:
        task_id = task_id.replace("%", "%25")
    if task_id == "used" or task_id.endswith("/used"):
        task_id = task_id[:-4] + "%75sed"
    if run:
        task_id = "run/" + task_id
    elif task_id == "run" or task_id.startswith("run/"):
        task_id = "%72un" + task_id[3:]
    else:
        head, slash, rest = task_id.partition("/")
        if ":" in head:  # a scheme: the id would read as a location's
            task_id = head.replace(":", "%3A") + slash + rest
    return f"{task_id}/used/{name}" if used else f"{task_id}/{name}"


def value_id(value: Value, task_id: str, *, used: bool) -> str:
    """A value's stable id: its own, else its location (so the same data used by
    several workflows is one node), else one derived from its task and name."""
    if value.id is not None:
        return value.id
    if value.location is not None:
        return location_form(value.location)
    return default_value_id(task_id, value.name, used=used)
