"""Generic questions any captured workflow can answer: ``lineage``, ``impact`` and ``runs``.

``lineage`` walks back from a data item (a value, a location, a model) hop by hop: a value
``prov:wasDerivedFrom`` a value, or ``prov:wasGeneratedBy`` an activity that ``prov:used`` a
value; the walk ends at raw data and at the domain-KG resources a value ``provlake:denotes``
(one more hop, not walked further). ``impact`` is the same walk forwards (no KG hop).

Not lineage: the link from a captured value to its prospective attribute, which the mapper
also writes as ``prov:wasDerivedFrom`` (docs/reference/graph.md). That attribute is a
``spec/`` IRI (``mint_iri("spec", workflow, transformation, name)``, also for a name the
spec does not declare, when the node has no triple of its own), so a hop to a node under
``{base}spec/`` is not taken: the builders read the base from ``v["base"]`` (the catalog's
render passes it).

Each edge is listed once per activity behind it, at its shortest distance from the start:
the edges at distance k are the last hop of a chain of k hops (one UNION branch per k, as
:mod:`provkg.queries.sprov` ``s1``). In the standard dialect each hop is a property path
from the bound end (``?a (p|q/r) ?b``: walked from ``?a``); on Virtuoso, which refuses
such paths, the transitive sub-query with step numbers (``_walk_virtuoso``).
"""

from __future__ import annotations

from typing import Any

from provkg.errors import BadParameter
from provkg.queries import parts as P
from provkg.queries.builder import duration, optional, select, subquery, union
from provkg.queries.pairs import concat_pairs
from provkg.queries.params import values_block
from provkg.term import literal
from provkg.vocab import DEFAULT_BASE

__all__ = ["MAX_WALK_DEPTH", "impact", "lineage", "runs"]

#: the deepest walk ``lineage`` and ``impact`` write (one UNION branch per hop count)
MAX_WALK_DEPTH = 10

#: one hop back: derived from, or an input of the activity that generated it
_BACK = "(prov:wasDerivedFrom|prov:wasGeneratedBy/prov:used)"
#: one hop forward: what derives from it, or an output of an activity that used it
_FORWARD = "(^prov:wasDerivedFrom|^prov:used/^prov:wasGeneratedBy)"


def _not_spec(node: str, v: dict[str, Any]) -> str:
    """The FILTER that keeps ``node`` off the prospective ``spec/`` IRIs (not lineage)."""
    prefix = literal(str(v.get("base") or DEFAULT_BASE) + "spec/")
    return f"FILTER(!STRSTARTS(STR({node}), {prefix}))"


def _depth(v: dict[str, Any]) -> int:
    depth = int(v["depth"])
    if depth > MAX_WALK_DEPTH:
        raise BadParameter(f"parameter 'depth': expected an integer <= {MAX_WALK_DEPTH}")
    return depth


def _edges(other: str) -> dict[str, Any]:
    """Each edge once (per activity), at its shortest distance from the start: chains of
    several lengths (a diamond, a cycle) reach the same edge more than once."""
    return dict(group_by=["?data", f"?{other}", "?activity"],
                order_by=["?depth", "?data", f"?{other}", "?activity"])


def _columns(other: str) -> list[str]:
    return ["?data", f"?{other}", "?activity", "(MIN(?edge_depth) AS ?depth)"]


def _edge_forms(last: str, v: dict[str, Any], *, back: bool, other: str) -> list[list[str]]:
    """The edge from ``last`` to ``other`` in each of its forms: with the activity behind it,
    else a bare derivation (a pair that has both is one edge, the one with its activity),
    else (back) a KG resource. Plain patterns walked from ``last``, one UNION branch each:
    an OPTIONAL for the activity was evaluated on its own at two hops and more (every
    generated value joined to every use in the store: impact at full scale 8.3 s -> 1 ms)."""
    if back:
        return [[f"{last} prov:wasGeneratedBy ?activity .", f"?activity prov:used {other} .", _not_spec(other, v)],
                [f"{last} prov:wasDerivedFrom {other} .", _not_spec(other, v),
                 f"FILTER NOT EXISTS {{ {last} prov:wasGeneratedBy ?any_act . ?any_act prov:used {other} . }}"],
                [f"{last} provlake:denotes {other} ."]]
    return [[f"?activity prov:used {last} .", f"{other} prov:wasGeneratedBy ?activity ."],
            [f"{other} prov:wasDerivedFrom {last} .",
             f"FILTER NOT EXISTS {{ {other} prov:wasGeneratedBy ?any_act . ?any_act prov:used {last} . }}"]]


def _walk_standard(start: str | tuple[str, ...], v: dict[str, Any], *, back: bool, other: str) -> list[str]:
    """One UNION branch per distance k and form of the last edge: k - 1 hops from the start,
    then the edge itself (``?data`` to ``other``, with the activity behind it when there is
    one), all in one group so the store walks from the start."""
    branches = []
    for k in range(1, _depth(v) + 1):
        nodes = ["?start"] + [f"?n{k}_{i}" for i in range(1, k)]
        hops: list[str] = []
        for i in range(k - 1):
            hops.append(f"{nodes[i]} {_BACK if back else _FORWARD} {nodes[i + 1]} .")
            if back:
                hops.append(_not_spec(nodes[i + 1], v))
        last = nodes[-1]
        for edge in _edge_forms(last, v, back=back, other=other):
            branches.append([values_block({"start": start}), *hops, *edge,
                             f"BIND({last} AS ?data)", f"BIND({k} AS ?edge_depth)"])
    return [union(*branches)]


def _flat(*patterns: str) -> str:
    return " ".join(" ".join(patterns).split())


def _step_virtuoso(a: str, b: str, task: str, v: dict[str, Any], *, back: bool) -> str:
    """One hop from ``a`` to ``b`` on one line (Virtuoso's transitive sub-query body)."""
    if back:
        return _flat(union([f"{a} prov:wasDerivedFrom {b} .", _not_spec(b, v)],
                           [f"{a} prov:wasGeneratedBy {task} .", f"{task} prov:used {b} ."]))
    return _flat(union([f"{b} prov:wasDerivedFrom {a} ."],
                       [f"{task} prov:used {a} .", f"{b} prov:wasGeneratedBy {task} ."]))


def _edge_virtuoso(a: str, v: dict[str, Any], *, back: bool, other: str) -> str:
    """The edge from ``a`` to ``other``: with its activity, else a bare derivation (a pair
    that has both is one edge, the one with its activity), else (back) a KG resource."""
    if back:
        with_activity = [f"{a} prov:wasGeneratedBy ?activity .", f"?activity prov:used {other} ."]
        bare = [f"{a} prov:wasDerivedFrom {other} .", _not_spec(other, v),
                f"FILTER NOT EXISTS {{ {a} prov:wasGeneratedBy ?any_act . ?any_act prov:used {other} . }}"]
        return _flat(union(bare, with_activity, [f"{a} provlake:denotes {other} ."]))
    with_activity = ["?activity prov:used " + a + " .", f"{other} prov:wasGeneratedBy ?activity ."]
    bare = [f"{other} prov:wasDerivedFrom {a} .",
            f"FILTER NOT EXISTS {{ {other} prov:wasGeneratedBy ?any_act . ?any_act prov:used {a} . }}"]
    return _flat(union(bare, with_activity))


def _walk_virtuoso(starts: str | tuple[str, ...], v: dict[str, Any], *, back: bool, other: str) -> list[str]:
    """The walk as Virtuoso runs it (see ``sprov._s1_virtuoso``): its transitive sub-query
    numbers the hops up to ``depth - 1`` from the start (written in place and compared with
    a FILTER, so Virtuoso walks from it), then the last edge from the node reached."""
    depth = _depth(v)
    branches = []
    for i, start in enumerate((starts,) if isinstance(starts, str) else starts):
        s, k = f"?w{i}_s", f"?w{i}_k"
        walk = (f"{{ SELECT {s} ?data WHERE {{ {_step_virtuoso(s, '?data', f'?w{i}_t', v, back=back)} }} }} "
                f"OPTION (TRANSITIVE, t_in({s}), t_out(?data), t_min(0), t_max({depth - 1}), "
                f"t_step('step_no') AS {k}) .")
        branches.append([subquery(["?data", other, "?activity", f"(({k} + 1) AS ?edge_depth)"],
                                  [walk, f"FILTER({s} = {start})",
                                   _edge_virtuoso("?data", v, back=back, other=other)])])
    return [union(*branches)]


def _walk(t: dict[str, Any], v: dict[str, Any], dialect: str, *, back: bool, other: str) -> list[str]:
    walk = _walk_virtuoso if dialect == "virtuoso" else _walk_standard
    return walk(t["data"], v, back=back, other=f"?{other}")


def lineage(t: dict[str, Any], v: dict[str, Any], schema: str, dialect: str) -> str:
    """Every edge up to ``depth`` hops back from ``data`` (columns data, derived_from,
    activity, depth); the same in every schema (PROV terms only)."""
    return select(_columns("derived_from"), _walk(t, v, dialect, back=True, other="derived_from"),
                  **_edges("derived_from"))


def impact(t: dict[str, Any], v: dict[str, Any], schema: str, dialect: str) -> str:
    """Every edge up to ``depth`` hops forward from ``data`` (columns data, derived,
    activity, depth): what was made from it, directly or not."""
    return select(_columns("derived"), _walk(t, v, dialect, back=False, other="derived"),
                  **_edges("derived"))


def runs(t: dict[str, Any], v: dict[str, Any], schema: str, dialect: str) -> str:
    """Every training of the workflow's runs: its run and the run's ``rdfs:label``, status
    (``provkg:status``; else finished when it ended, running when not), start, duration,
    hyperparameters and evaluations (encoded pairs)."""
    anchor: list[str | P.Part] = [values_block({"wf": t["workflow"]}),
                                  P.workflow_stage("?wf", "?training", "training", schema)]
    hyper = subquery(["?training", f"({concat_pairs('?name', '?hv')} AS ?hyperparameters)"],
                     [*anchor, P.hyperparameters("?training", "?name", "?hv", schema)],
                     group_by=["?training"])
    evals = subquery(["?training", f"({concat_pairs('?ename', '?ev')} AS ?evaluations)"],
                     [*anchor, P.model_evaluation("?training", "?e", "?ev", schema, name="?ename")],
                     group_by=["?training"])
    label = subquery(["?run", "(MIN(STR(?run_label)) AS ?label)"],
                     [*anchor, P.link("?training provlake:isPartOf ?run", "?run rdfs:label ?run_label")],
                     group_by=["?run"])
    where: list[str | P.Part] = [*anchor, P.link("?training provlake:isPartOf ?run"),
             optional("?training prov:startedAtTime ?started ."),
             optional("?training prov:endedAtTime ?end ."),
             optional("?training provkg:status ?status_given ."),
             optional(label), optional(hyper), optional(evals),
             'BIND(COALESCE(?status_given, IF(BOUND(?end), "finished", "running")) AS ?status)',
             *duration("?started", "?end", "?s", dialect=dialect)]
    return select(["?training", "?run", "?label", "?status", "?started", "(xsd:double(?s) AS ?seconds)",
                   "?hyperparameters", "?evaluations"], where, distinct=True,
                  order_by=["?started", "STR(?training)"])
