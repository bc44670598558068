"""provkg.capture — record what a running workflow does, at next to no cost.

>>> from provkg import capture
>>> sink = capture.MemorySink()
>>> with capture.workflow("flower-training", sink=sink) as wf:
...     with wf.task("training", used={"learning_rate": 1e-3,
...                                    "train_set": capture.ref("file:///data/train.h5")}) as t:
...         t.generate(model=capture.ref("file:///models/m.pt"))
>>> len(sink.events)
4

The caller's thread only builds a plain dict per event and queues it; a background thread
batches, serializes and delivers to the sink (``file:DIR``, ``http(s)://...``,
``mqtt://HOST:PORT/TOPIC`` or any object with ``send(events)`` / ``close()``). Undeliverable
batches wait in a disk spool (``provkg replay``). Nothing here raises into user code, and this
package imports no RDF, store or web-server library.

Forked children (``multiprocessing`` workers, ``DataLoader`` workers) continue the parent's open
runs with task ids of their own; a ``spawn`` child records into a run once it received the
``Workflow`` (it pickles); ``@track`` follows coroutines and generators to their end; SIGTERM and
an interpreter exit end what is still open as ``failed``. See ``processes`` and ``exits``.
"""

from provkg.capture.context import current_workflow
from provkg.capture.decorator import track
from provkg.capture.refs import ref
from provkg.capture.roles import datasets, hyperparameters, measures, models, with_role
from provkg.capture.sink import MemorySink, Sink, SinkRejected
from provkg.capture.sink_urls import open_sink
from provkg.capture.task import Task, current_task
from provkg.capture.values import MAX_ITEMS, Ref
from provkg.capture.workflow import Workflow, workflow

__all__ = [
    "workflow",
    "Workflow",
    "Task",
    "track",
    "ref",
    "Ref",
    "Sink",
    "SinkRejected",
    "MemorySink",
    "open_sink",
    "current_workflow",
    "current_task",
    "MAX_ITEMS",
    "hyperparameters",
    "measures",
    "datasets",
    "models",
    "with_role",
]
