"""DNNProv's hyperparameter-analysis queries (Table 1 of Pina et al., ``d1``-``d8``) and
ProvLight's federated-learning queries (``p1``, ``p2``), built from query parts.

Same calling convention as :mod:`provkg.queries.lifecycle`. "The best training" is the one
whose model has the best value of ``measure`` (an evaluation measure the training
generated), in the measure's natural direction.
"""

from __future__ import annotations

from provkg.queries import parts as P
from provkg.queries.builder import (
    anchored_optional,
    duration,
    group,
    optional,
    select,
    subquery,
    union,
)
from provkg.queries.lifecycle import Where, measure_lower, training_measure
from provkg.queries.pairs import concat_pairs
from provkg.queries.params import values_block
from provkg.term import literal

__all__ = ["d1", "d2", "d3", "d4", "d5", "d6", "d7", "d8", "p1", "p2"]


def _trainings(t: dict[str, str], schema: str, *names: str) -> list[str | P.Part]:
    """Training stages ``?training`` of the workflow ``t["workflow"]`` (anchored by VALUES)."""
    bound = {"wf": t["workflow"], **{n: t[n] for n in names}}
    return [values_block(bound), P.workflow_stage("?wf", "?training", "training", schema)]


def _bound(t: dict[str, str], name: str, dialect: str) -> str:
    """The parameter ``name`` as used inside an OPTIONAL: its variable, or on Virtuoso its
    term (and then not in the VALUES block at all): Virtuoso 7.2 mis-compiles a query whose
    VALUES binds a variable that only an OPTIONAL uses (d3 lost epoch 0; d7 failed with SP031
    "no SPART_VARR_FIXED")."""
    return t[name] if dialect == "virtuoso" else f"?{name}"


def _measured(t: dict[str, str], schema: str, v: dict[str, object]) -> list[str | P.Part]:
    """Trainings of the workflow with their value ``?value`` of ``measure`` (the training's,
    or its last epoch's: :func:`provkg.queries.lifecycle.training_measure`)."""
    return training_measure(_trainings(t, schema, "measure"), schema, v, "?value")


def _best(t: dict[str, str], v: dict[str, object], schema: str) -> list[str | P.Part]:
    """The best training(s) of the workflow by ``measure`` (ties: all of them)."""
    agg = "MIN" if measure_lower(v) else "MAX"
    # a checking stage's value is an aggregate of a sub-select: Virtuoso 7.2 fails to compile
    # `=` between two of them beside an OPTIONAL (SQ156 "Bad dfe"), not the same test as a range
    same = ("FILTER(?value = ?best)" if (v.get("stage") or "training") == "training"
            else "FILTER(?value >= ?best && ?value <= ?best)")
    return [subquery([f"({agg}(?value) AS ?best)"], _measured(t, schema, v)),
            *_measured(t, schema, v), same]


def _hyperparameter_pairs(t: dict[str, str], schema: str) -> str:
    """``?hyperparameters`` of each training of the workflow (encoded pairs)."""
    return optional(subquery(
        ["?training", f"({concat_pairs('?name', '?hv')} AS ?hyperparameters)"],
        [*_trainings(t, schema), P.hyperparameters("?training", "?name", "?hv", schema)],
        group_by=["?training"]))


def d1(t: dict[str, str], v: dict[str, object], schema: str, dialect: str) -> str:
    where: Where = [values_block({"training": t["training"], "epoch": t["epoch"], "measure": t["measure"]}),
             P.stage("?training", "training", schema),
             P.section("?ep", "?training", "training", schema), P.link("?ep provkg:index ?epoch"),
             P.model_evaluation("?ep", "?m", "?value", schema, name="?measure")]
    return select(["?value"], where, order_by=["?value"])


def d2(t: dict[str, str], v: dict[str, object], schema: str, dialect: str) -> str:
    layer = P.Part("model schema", P.role_value("?layer", "model_schema", schema, name="?name",
                                                 with_value="?value"))
    where: Where = [values_block({"model": t["model"]}), P.link("?model prov:wasGeneratedBy ?task"),
             "{ ?task prov:used ?layer . } UNION { ?layer prov:wasGeneratedBy ?task . }", layer]
    return select(["?name", "?value"], where, distinct=True, order_by=["?name"])


def d3(t: dict[str, str], v: dict[str, object], schema: str, dialect: str) -> str:
    bound = {"training": t["training"]}
    if dialect != "virtuoso":  # see _bound
        bound["measure"] = t["measure"]
    anchor: Where = [values_block(bound),
              P.stage("?training", "training", schema),
              P.section("?ep", "?training", "training", schema)]
    # the OPTIONAL carries the anchor (Oxigraph evaluates it on its own, then joins) and the
    # BINDs come last (patterns after a BIND are joined to it: the store would start there)
    where = [*anchor, P.link("?ep provkg:index ?epoch", "?ep prov:startedAtTime ?begin",
                             "?ep prov:endedAtTime ?end"),
             anchored_optional(anchor, P.model_evaluation("?ep", "?m", "?loss", schema,
                                                          name=_bound(t, "measure", dialect)),
                                dialect=dialect),
             *duration("?begin", "?end", "?s", dialect=dialect)]
    return select(["?epoch", "(xsd:double(?s) AS ?seconds)", "?loss"], where,
                  order_by=["?epoch"])


def d4(t: dict[str, str], v: dict[str, object], schema: str, dialect: str) -> str:
    # ranked by a checking stage, Virtuoso 7.2 needs the anchor in the OPTIONAL too (SP031)
    anchoring = dialect if (v.get("stage") or "training") == "training" else "standard"
    where = [*_best(t, v, schema),
             anchored_optional(_trainings(t, schema), P.hyperparameters(
                 "?training", literal("learning_rate"), "?learning_rate", schema), dialect=anchoring)]
    return select(["?training", "?learning_rate", "?value"], where, distinct=True,
                  order_by=["STR(?training)"])


def _top(t: dict[str, str], v: dict[str, object], schema: str, dialect: str) -> str:
    direction = "ASC" if measure_lower(v) else "DESC"
    order = [f"{direction}(?value)", "STR(?training)"]
    top = subquery(["?training", "?value"], _measured(t, schema, v), order_by=order,
                   limit=int(v["k"]))  # type: ignore[call-overload]
    return select(["?training", "?value", "?hyperparameters"],
                  [top, _hyperparameter_pairs(t, schema)], order_by=order)


d5 = _top
p2 = _top


def d6(t: dict[str, str], v: dict[str, object], schema: str, dialect: str) -> str:
    return _adaptations(_best(t, v, schema), schema, dialect)


def adaptations(t: dict[str, str], v: dict[str, object], schema: str, dialect: str) -> str:
    """d6 for a given training: its learning-rate adaptations (epoch, technique, new value)."""
    return _adaptations([values_block({"training": t["training"]}),
                         P.stage("?training", "training", schema)], schema, dialect)


def adaptations_precondition(t: dict[str, str], v: dict[str, object], schema: str, dialect: str) -> str:
    """Some adaptation of the training's workflow at all: without, the walk from the training
    through its epochs to their children (every batch) finds nothing slowly (600 ms at full
    scale)."""
    return select(["?adapt"], [values_block({"training": t["training"]}),
                               P.link("?training prov:wasInfluencedBy ?training_tr",
                                      "?training_tr provlake:isPartOf ?wf"),
                               P.workflow_stage("?wf", "?adapt", "adaptation", schema)], limit=1)


def _adaptations(trainings: list[str | P.Part], schema: str, dialect: str) -> str:
    """The learning-rate adaptations of the trainings ``?training`` that ``trainings`` binds."""
    new = P.Part("new value", ("?new prov:wasGeneratedBy ?adapt",
                               *P.role_value("?new", "hyperparameter", schema,
                                              name=literal("learning_rate"),
                                              with_value="?new_value")))
    # the adaptation is a child of the training (its own index is the epoch) or of the
    # epoch it happened in (that epoch's index, unless it has its own)
    epoch: list[str | P.Part]
    if dialect == "virtuoso":  # it fails on the `?` paths (SQ200 "No column")
        # (a FILTER in a branch sees only that branch's variables: each binds ?training)
        epoch = [union(
            [P.link("?adapt prov:wasInformedBy ?training", "?adapt provkg:index ?epoch")],
            [P.link("?adapt prov:wasInformedBy ?via", "?via prov:wasInformedBy ?training",
                    "?adapt provkg:index ?epoch")],
            [P.link("?adapt prov:wasInformedBy ?via", "?via prov:wasInformedBy ?training",
                    "?via provkg:index ?epoch"),
             "FILTER NOT EXISTS { ?adapt provkg:index ?own }"])]
    else:  # plain patterns, walked from ?adapt (an OPTIONAL, UNION or group would be
        # evaluated on its own: every index of the store read, then joined)
        epoch = [P.link("?adapt prov:wasInformedBy ?via", "?via prov:wasInformedBy? ?training",
                        "?adapt prov:wasInformedBy? ?indexed", "?indexed provkg:index ?epoch"),
                 ("FILTER(sameTerm(?indexed, ?adapt) || (sameTerm(?indexed, ?via) && "
                  "!sameTerm(?via, ?training) && NOT EXISTS { ?adapt provkg:index ?own }))")]
    # the technique as the adaptation recorded it: among what it used or what it generated
    technique = optional(_used_or_generated("?adapt", "?tq"), P.link(
        "?tq prov:wasDerivedFrom ?tq_attr", '?tq_attr rdfs:label "technique"', "?tq prov:value ?technique"))
    where = [*trainings, P.stage("?adapt", "adaptation", schema), *epoch, new, technique]
    return select(["?training", "?epoch", "?technique", "?new_value"], where, distinct=True,
                  order_by=["STR(?training)", "?epoch"])


def d6_precondition(t: dict[str, str], v: dict[str, object], schema: str, dialect: str) -> str:
    """Some adaptation of the workflow at all: d6 ranks every training first, and on a workflow
    of 16,000 trainings and no adaptation its two passes (the last-epoch fallback) can run
    past the server's time limit (a 504) to find no row."""
    return select(["?adapt"], [values_block({"wf": t["workflow"]}),
                               P.workflow_stage("?wf", "?adapt", "adaptation", schema)], limit=1)


def _used_or_generated(task: str, var: str) -> str:
    """``var`` is a value ``task`` used, or one it generated."""
    return f"{{ {task} prov:used {var} . }} UNION {{ {var} prov:wasGeneratedBy {task} . }}"


#: the names a filter is recorded under (DNNProv's grayscale filter)
_FILTER_NAMES = '"filter" "filter_name"'


def _filter_value(task: str, var: str, out: str) -> list[str | P.Part]:
    """``out``: the value named ``filter`` or ``filter_name`` that ``task`` used or generated."""
    # the names first: the selective end when a store evaluates this on its own
    return [f"VALUES {var}_name {{ {_FILTER_NAMES} }}",
            P.link(f"{var}_attr rdfs:label {var}_name", f"{var} prov:wasDerivedFrom {var}_attr",
                   f"{var} prov:value {out}"),
            _used_or_generated(task, var)]


#: one step upstream from an activity or a value: a dependency (or parent) of an activity,
#: what it used, what a value was derived from, the activity that generated a value
_UPSTREAM = ("prov:wasInformedBy", "prov:used", "prov:wasDerivedFrom", "prov:wasGeneratedBy")


def _upstream(training: str, up: str, dialect: str) -> list[str]:
    """``up``: an activity upstream of ``training`` (one or more steps of :data:`_UPSTREAM`:
    through its dependencies and the derivations of the data it used). A prospective
    attribute (a value's ``prov:wasDerivedFrom`` link to the spec) ends the walk there: it
    has none of these links."""
    if dialect != "virtuoso":
        return [f"{training} ({'|'.join(_UPSTREAM)})+ {up} ."]
    # Virtuoso: no such paths (see builder.lineage); one explicit step from the training,
    # then its transitive sub-query from the node that step reached
    def step(a: str, b: str) -> str:
        return " UNION ".join(f"{{ {a} {p} {b} . }}" for p in _UPSTREAM)
    first = f"{up}_1"
    return [f"{{ SELECT {training} {first} WHERE {{ {step(training, first)} }} }}",
            f"{{ SELECT {first} {up} WHERE {{ {step(first, up)} }} }} "
            f"OPTION (TRANSITIVE, t_distinct, t_in({first}), t_out({up}), t_min(0)) ."]


def _filter(training: str, anchor: list[str | P.Part], dialect: str) -> list[str]:
    """``?filter``: the training's own ``filter`` / ``filter_name`` value (used or generated),
    else one found upstream of it (:func:`_upstream`) on the activity that applied it: a
    value of that name it used or generated, or, for an activity of a transformation named
    ``filter``, the text values it used."""
    own = anchored_optional(anchor, *_filter_value(training, "?f", "?own_filter"), dialect=dialect)
    named = _filter_value("?f_up", "?uf", "?up_filter")
    by_transformation: list[str | P.Part] = [
        P.link("?f_up prov:wasInfluencedBy ?f_up_tr", '?f_up_tr rdfs:label "filter"',
               "?f_up prov:used ?uf", "?uf prov:value ?up_filter"),
        "FILTER(isLiteral(?up_filter) && DATATYPE(?up_filter) = xsd:string)"]
    # (the anchor inside: Oxigraph would walk upstream of every task of the store)
    upstream = anchored_optional(anchor, "FILTER(!BOUND(?own_filter))",
                                  *_upstream(training, "?f_up", dialect),
                                  union(named, by_transformation), dialect=dialect)
    return [own, upstream, "BIND(COALESCE(?own_filter, ?up_filter) AS ?filter)"]


def _as_text(value: object) -> str | None:
    """How a number or boolean parameter reads as text (a hyperparameter recorded as the
    string "0.001", as argparse or an environment variable gives it, has that text)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    return None


def d7(t: dict[str, str], v: dict[str, object], schema: str, dialect: str) -> str:
    hyperparameter = P.hyperparameters("?training", "?hyperparameter", "?hv", schema)
    text = _as_text(v["value"])
    read = "LCASE(STR(?hv))" if isinstance(v["value"], bool) else "STR(?hv)"  # True, true
    as_string = ("" if text is None else
                 f" || (isLiteral(?hv) && DATATYPE(?hv) = xsd:string && {read} = {literal(text)})")
    if dialect == "virtuoso":
        # Virtuoso 7.2 cannot compile a FILTER on a VALUES variable beside an OPTIONAL (SP031
        # "no SPART_VARR_FIXED"): the bound value is compared inside the pattern's own group
        where = [*_trainings(t, schema, "hyperparameter"),
                 group([hyperparameter, f"FILTER(?hv = {t['value']}{as_string})"])]
    else:
        where = [*_trainings(t, schema, "hyperparameter", "value"), hyperparameter,
                 f"FILTER(?hv = ?value{as_string})"]
    where += _filter("?training", _trainings(t, schema), dialect)
    return select(["?training", "?filter"], where, distinct=True, order_by=["STR(?training)"])


def d8(t: dict[str, str], v: dict[str, object], schema: str, dialect: str) -> str:
    low = measure_lower(v)
    best, worst = ("MIN", "MAX") if low else ("MAX", "MIN")
    # epochs, not epoch runs: a retried epoch (the same index twice) counts once
    epochs = subquery(["?training", "(COUNT(DISTINCT COALESCE(?i, ?ep)) AS ?n_epochs)"],
                      [*_trainings(t, schema),
                       P.section("?ep", "?training", "training", schema),
                       optional(P.link("?ep provkg:index ?i"))],
                      group_by=["?training"])
    where = [subquery([f"({best}(?value) AS ?best)", f"({worst}(?value) AS ?worst)"],
                      _measured(t, schema, v)),
             *_measured(t, schema, v),
             'VALUES ?rank { "best" "worst" }',
             'FILTER((?rank = "best" && ?value = ?best) || (?rank = "worst" && ?value = ?worst))',
             *_filter("?training", _trainings(t, schema), dialect), optional(epochs),
             "BIND(COALESCE(?n_epochs, 0) AS ?epochs)"]
    return select(["?training", "?rank", "?filter", "?epochs"], where, distinct=True,
                  order_by=["?rank", "STR(?training)"])


_FINISHED_E = 'FILTER NOT EXISTS { ?e provkg:status "failed" }'
_FINISHED_EP = 'FILTER NOT EXISTS { ?ep provkg:status "failed" }'


def p1(t: dict[str, str], v: dict[str, object], schema: str, dialect: str) -> str:
    # the latest epoch that ended, and did not fail: one still running has no time yet
    # (online use: taken, it would keep a running training out of the answer until its
    # epoch ended); one ended by an exception or SIGTERM has a partial time and no loss,
    # where a device killed with -9 shows its last whole epoch. A training with rollups of
    # its epochs (it ended, and the spec rolls its sections up) names that epoch in them
    # (provkg:latestExecution, chosen as the full branch chooses); the others are answered
    # from every epoch. Each branch carries its own anchored loss OPTIONAL, so the store
    # reads the losses of the chosen epochs only
    where = [union(_p1_rolled_up(t, schema, dialect), _p1_full(t, schema, dialect)),
             _hyperparameter_pairs(t, schema), *duration("?begin", "?end", "?s", dialect=dialect)]
    # ?end: of an epoch index run twice (a resume), the answer keeps the later run (latest_by)
    return select(["?training", "?hyperparameters", "?epoch", "(xsd:double(?s) AS ?seconds)",
                   "?loss", "?end"], where,
                  order_by=["STR(?training)"])


def _p1_epoch(anchor: list[str | P.Part], chosen: list[str | P.Part], schema: str,
              dialect: str) -> list[str | P.Part]:
    """The epoch ``?ep`` (index ``?epoch``) of each ``?training`` that ``anchor`` and then
    ``chosen`` bind, with its times and loss; the OPTIONAL carries ``anchor`` alone (see d3)."""
    return [*anchor, *chosen,
            P.link("?ep provkg:index ?epoch", "?ep prov:startedAtTime ?begin",
                   "?ep prov:endedAtTime ?end"),
            anchored_optional(anchor, P.model_evaluation("?ep", "?l", "?loss", schema,
                                                         name=literal("loss")), dialect=dialect)]


def _p1_rolled_up(t: dict[str, str], schema: str, dialect: str) -> list[str | P.Part]:
    """Trainings with epoch rollups: the latest execution each rollup names, of the greatest
    index over the training's rollups (one per section transformation)."""
    named = P.link("?training provkg:hasSectionSummary ?r", "?r provkg:latestExecution ?e")
    latest = subquery(["?training", "(MAX(?i) AS ?epoch)"],
                      [*_trainings(t, schema), named, P.link("?e provkg:index ?i")],
                      group_by=["?training"])
    anchor: list[str | P.Part] = [
        *_trainings(t, schema),
        P.link("?training provkg:hasSectionSummary ?rolled", "?rolled provkg:latestExecution ?ep"),
        P.section("?ep", "?training", "training", schema)]
    return _p1_epoch(anchor, [latest], schema, dialect)


def _p1_full(t: dict[str, str], schema: str, dialect: str) -> list[str | P.Part]:
    """Trainings without rollups (running, or a spec that keeps every level in ``full``): the
    greatest index among their ended, unfailed epochs, then those epochs."""
    trainings = [values_block({"wf": t["workflow"]}),
                 P.without_rollup(P.workflow_stage("?wf", "?training", "training", schema).sparql(),
                                  "?training")]
    latest = subquery(["?training", "(MAX(?i) AS ?epoch)"],
                      [*trainings, P.section("?e", "?training", "training", schema),
                       P.link("?e provkg:index ?i", "?e prov:endedAtTime ?e_end"), _FINISHED_E],
                      group_by=["?training"])
    anchor: list[str | P.Part] = [*trainings, P.section("?ep", "?training", "training", schema)]
    return _p1_epoch(anchor, [latest, _FINISHED_EP], schema, dialect)
