"""Questions that list what a store holds, for pickers and overviews: ``workflows``,
``data``, ``measures``, ``epochs``, ``batches`` and ``about``. Generic (any workflow that
follows the lifecycle conventions), and what the web UI reads besides ``runs``, ``lineage``
and ``impact``: it asks nothing the catalog does not, so `provkg query` gives every figure
the UI shows.
"""

from __future__ import annotations

from typing import Any

from provkg.queries import parts as P
from provkg.queries.builder import anchored_optional, duration, optional, select, subquery, union
from provkg.queries.lifecycle import Where
from provkg.queries.params import values_block
from provkg.term import literal

__all__ = ["ABOUT_LIMIT", "about", "batches", "data", "epochs", "measures", "workflows"]

#: statements ``about`` lists at most, each way (a spec attribute is the object of every value)
ABOUT_LIMIT = 500

#: the roles ``data`` lists: what a training used and made
_DATA_ROLES = ("dataset", "model")


def workflows(t: dict[str, Any], v: dict[str, Any], schema: str, dialect: str) -> str:
    """Every prospective workflow (``provlake:Workflow``) by name, with how many runs and
    trainings of it the store holds (0 for a spec registered before any event). One group
    over nested OPTIONALs: Virtuoso 7.2 fails to compile the counts as an optional
    sub-select (SQ156)."""
    stage = P.workflow_stage("?wf", "?training", "training", schema)
    where: Where = [P.link("?wf a provlake:Workflow", "?wf rdfs:label ?workflow"),
                    optional(stage, optional("?training provlake:isPartOf ?run ."))]
    return select(["?workflow", "(COUNT(DISTINCT ?run) AS ?runs)",
                   "(COUNT(DISTINCT ?training) AS ?trainings)"], where,
                  group_by=["?workflow"], order_by=["STR(?workflow)"])


def data(t: dict[str, Any], v: dict[str, Any], schema: str, dialect: str) -> str:
    """The datasets the workflow's trainings used and the models they generated: the value,
    its role and the training (a start for ``lineage`` and ``impact``)."""
    anchor: Where = [values_block({"wf": t["workflow"]}),
                     P.workflow_stage("?wf", "?training", "training", schema)]
    branches: list[Where] = []
    for role in _DATA_ROLES:
        link = ("?training prov:used ?data" if role == "dataset"
                else "?data prov:wasGeneratedBy ?training")
        branches.append([*anchor, P.link(link, *P.role_value("?data", role, schema)),
                         f"BIND({literal(role)} AS ?role)"])
    return select(["?data", "?role", "?training"], [union(*branches)], distinct=True,
                  order_by=["?role", "STR(?training)", "STR(?data)"])


def measures(t: dict[str, Any], v: dict[str, Any], schema: str, dialect: str) -> str:
    """The measures of each training of a workflow and of each validation / evaluation that
    checked it, as the stage generated them (not its epochs'): one request for a runs table
    however many trainings (the epochs of 8 trainings at full scale are 2,400 reads)."""
    anchor: Where = [values_block({"wf": t["workflow"]}),
                     P.workflow_stage("?wf", "?training", "training", schema)]
    own: Where = [*anchor, P.model_evaluation("?training", "?m", "?value", schema, name="?measure_label"),
                  'BIND("training" AS ?stage)']
    branches = [own]
    for kind in ("validation", "evaluation"):
        for shape in P.checking_shapes(anchor, "?training", "?x"):  # apart: see epochs
            branches.append([*shape, P.stage("?x", kind, schema),
                             P.model_evaluation("?x", "?m", "?value", schema, name="?measure_label"),
                             f"BIND({literal(kind)} AS ?stage)"])
    return select(["?training", "?stage", "(STR(?measure_label) AS ?measure)", "?value"],
                  [union(*branches)], distinct=True,
                  order_by=["STR(?training)", "?stage", "?measure", "?value"])


def _stage_rows(anchor: Where, kind: str, x: str, schema: str, dialect: str) -> Where:
    """Rows of the execution ``x`` of a ``kind`` stage: each section's (epoch's) index, time
    and measures, and the measures of the stage itself (no epoch)."""
    epoch: Where = [*anchor, P.section("?ep", x, kind, schema), P.link("?ep provkg:index ?epoch")]
    times = P.link("?ep prov:startedAtTime ?begin", "?ep prov:endedAtTime ?end")
    measure = P.model_evaluation("?ep", "?m", "?value", schema, name="?measure_label")
    sections: Where = [*epoch, anchored_optional(epoch, times, dialect=dialect),
                       anchored_optional(epoch, measure, dialect=dialect),
                       *duration("?begin", "?end", "?s", dialect=dialect)]
    whole: Where = [*anchor, P.model_evaluation(x, "?m", "?value", schema, name="?measure_label")]
    return [union(sections, whole), f"BIND({literal(kind)} AS ?stage)"]


def epochs(t: dict[str, Any], v: dict[str, Any], schema: str, dialect: str) -> str:
    """Each epoch of a training and of the validations / evaluations that checked it: its
    index, seconds and every measure it generated, one row per measure (an epoch without
    measures has one row, with none); a stage's own measures have no epoch."""
    anchor: Where = [values_block({"training": t["training"]}), P.stage("?training", "training", schema)]
    branches = [_stage_rows(anchor, "training", "?training", schema, dialect)]
    for kind in ("validation", "evaluation"):
        # each shape of "checked the training" (parts.checking_shapes) a branch of its own,
        # the epochs inside it: Oxigraph evaluates a UNION apart and joins after, so the
        # epochs joined to a union of the shapes were every validation section of the store
        # first (950 ms a stage at full scale; 13 ms so)
        for shape in P.checking_shapes(anchor, "?training", "?x"):
            branches.append(_stage_rows([*shape, P.stage("?x", kind, schema)], kind, "?x", schema, dialect))
    return select(["?stage", "?epoch", "(xsd:double(?s) AS ?seconds)",
                   "(STR(?measure_label) AS ?measure)", "?value"],
                  [union(*branches)], distinct=True,
                  order_by=["?stage", "?epoch", "?measure"])


def about(t: dict[str, Any], v: dict[str, Any], schema: str, dialect: str) -> str:
    """The statements about a resource (any IRI: a captured node or a domain-KG resource such
    as a survey or a basin): each property and value, ``out`` (the resource is the subject)
    or ``in`` (the object), at most :data:`ABOUT_LIMIT` each way."""
    anchor = values_block({"r": t["resource"]})
    out = subquery(["?property", "?value", '("out" AS ?direction)'],
                   [anchor, "?r ?property ?value ."], order_by=["?property", "?value"],
                   limit=ABOUT_LIMIT)
    inc = subquery(["?property", "?value", '("in" AS ?direction)'],
                   [anchor, "?value ?property ?r ."], order_by=["?property", "?value"],
                   limit=ABOUT_LIMIT)
    return select(["?direction", "?property", "?value"], [union([out], [inc])],
                  order_by=["DESC(?direction)", "?property", "?value"])


def _batch_measures(schema: str) -> Where:
    """The measure ``?measure`` (bound) of each batch ``?batch`` of the epoch ``?epoch_exec``
    (index ``?epoch``) that has no rollup, as ``?value`` (numbers only)."""
    return [P.without_rollup("?epoch_exec provkg:index ?epoch", "?epoch_exec"),
            P.section("?batch", "?epoch_exec", "training", schema),
            P.model_evaluation("?batch", "?bm", "?value", schema, name="?measure"),
            "FILTER(isNumeric(?value))"]


def batches(t: dict[str, Any], v: dict[str, Any], schema: str, dialect: str) -> str:
    """A batch measure of a training, one row per epoch: how many batches had it and its
    min / avg / max over them. The curve of 60,000 batches drawn as one band per epoch; an
    epoch with a rollup (``granularity: both`` or ``summary``) is read from it, one node, and
    the others from their batches (the same figures: the rollup is made from those batches)."""
    anchor: Where = [values_block({"training": t["training"], "measure": t["measure"]}),
                     P.stage("?training", "training", schema),
                     P.section("?epoch_exec", "?training", "training", schema)]
    full = subquery(["?epoch", "(COUNT(?value) AS ?batches)", "(MIN(?value) AS ?min_value)",
                     "(AVG(?value) AS ?avg_value)", "(MAX(?value) AS ?max_value)"],
                    [*anchor, *_batch_measures(schema)], group_by=["?epoch"],
                    having="COUNT(?value) > 0")
    # an epoch run twice under one index has a rollup per run: combined as the GROUP BY of
    # the full branch combines their batches
    rolled = subquery(["?epoch", "(SUM(?n) AS ?batches)", "(MIN(?mn) AS ?min_value)",
                       "(SUM(?a * ?n) / SUM(?n) AS ?avg_value)", "(MAX(?mx) AS ?max_value)"],
                      [*anchor, P.link("?epoch_exec provkg:index ?epoch"),
                       P.section_summary("?epoch_exec", "?sum", measure="?measure", valueCount="?n",
                                         minValue="?mn", avgValue="?a", maxValue="?mx")],
                      group_by=["?epoch"], having="SUM(?n) > 0")
    return select(["?epoch", "?batches", "?min_value", "?avg_value", "?max_value"],
                  [union([full], [rolled])], order_by=["?epoch"])
