"""The canned lifecycle queries: names, questions, typed parameters, fixed columns.

One source of truth per query: the ``q*``, ``d*`` and ``p*`` queries are produced by the
builder from query parts (typed and tagged); the S-PROV ``s*`` queries are ``.rq`` files
in ``queries/`` (see :mod:`provkg.queries.rq` for their parameter convention).

>>> [q.name for q in canned_queries()][:3]
['q1', 'q2', 'q3']
>>> "VALUES" in render("q1", {"model": "file:///models/m.pt"}, schema="tagged")
True
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from provkg.errors import BadParameter, UnknownQuery
from provkg.queries import browse, dnnprov, generic, lifecycle, sprov
from provkg.queries.builder import VIRTUOSO_ORDERED, VIRTUOSO_PRAGMA, check_dialect, with_prefixes
from provkg.queries.pairs import format_pairs
from provkg.queries.params import REQUIRED, Parameter, parse_params, term_for
from provkg.queries.parts import SCHEMAS
from provkg.queries.rq import bind_rq, read_rq, rq_texts
from provkg.schemas import Schema
from provkg.term import iri
from provkg.vocab import DEFAULT_BASE

__all__ = ["CannedQuery", "canned_queries", "finish_rows", "get_query", "order_keys", "render"]

#: (parameter terms, parameter values, schema, dialect) -> SPARQL
Builder = Callable[[dict[str, str], dict[str, Any], str, str], str]


@dataclass(frozen=True)
class CannedQuery:
    """A named lifecycle question with typed parameters and fixed result columns."""

    name: str
    question: str
    parameters: tuple[Parameter, ...]
    columns: tuple[str, ...]
    schemas: tuple[str, ...] = SCHEMAS
    build: Builder | None = field(default=None, repr=False, compare=False)
    rq_text: str | None = field(default=None, repr=False, compare=False)
    #: columns holding encoded ``name=value`` pairs, decoded after the query
    pair_columns: tuple[str, ...] = ()
    #: builder options for a second try when the query finds nothing (see ``run_query``)
    fallback: tuple[tuple[str, object], ...] = ()
    #: (key column, time variable): of the rows of one key, only those with the latest time
    #: (the SPARQL projects the time too; it is not a column of the answer)
    latest_by: tuple[str, str] | None = None
    #: a SELECT that finds a row whenever the query can have one: when it finds none the
    #: answer is empty without running the query (``run_query``)
    precondition: Builder | None = field(default=None, repr=False, compare=False)
    #: the domain the query needs beyond the lifecycle conventions (its vocabulary, a domain
    #: KG): ``"seismic"`` for q1, q2, q5, q6; None for a generic query, which any workflow
    #: that follows the conventions answers
    domain: str | None = None

    @property
    def generic(self) -> bool:
        """Whether any workflow that follows the conventions can answer it (no :attr:`domain`)."""
        return self.domain is None

    def parse(self, params: dict[str, object]) -> dict[str, object]:
        """Checked and typed parameter values, defaults filled in (raises BadParameter)."""
        return parse_params(self.parameters, params, query=self.name)

    def render(self, params: dict[str, object], *, schema: str = "typed",
               base: str = DEFAULT_BASE, dialect: str = "standard",
               data_terms: dict[str, tuple[str, ...]] | None = None,
               options: dict[str, object] | None = None) -> str:
        """The SPARQL text for ``params`` in ``schema``, for stores of ``dialect`` (one of
        :data:`provkg.queries.builder.DIALECTS`: ``Store.query_dialect``); values enter as
        VALUES rows.
        ``data_terms`` replaces the term of a ``data`` parameter by the captured values a
        store says it names (:func:`provkg.service.querying.run_query` looks them up by
        location); without it a ``data`` parameter is read as a value id. ``options`` go to
        the builder with the parameter values (``fallback``).

        Raises:
            BadParameter: a bad parameter, or a schema this query does not exist in.
        """
        check_dialect(dialect)
        values, terms = self._bound(params, schema=schema, base=base, data_terms=data_terms)
        if self.rq_text is not None:
            return bind_rq(self.rq_text, terms)
        assert self.build is not None
        # the base too: a query that must tell the prospective ``spec/`` IRIs apart (generic)
        text = with_prefixes(self.build(terms, {**values, "base": base, **(options or {})}, schema, dialect))
        return VIRTUOSO_PRAGMA + text if dialect == "virtuoso" and self.name in VIRTUOSO_ORDERED else text

    def render_precondition(self, params: dict[str, object], *, schema: str = "typed",
                            base: str = DEFAULT_BASE, dialect: str = "standard",
                            data_terms: dict[str, tuple[str, ...]] | None = None) -> str | None:
        """The SPARQL of :attr:`precondition` (as :meth:`render`), or None without one."""
        if self.precondition is None:
            return None
        check_dialect(dialect)
        values, terms = self._bound(params, schema=schema, base=base, data_terms=data_terms)
        return with_prefixes(self.precondition(terms, values, schema, dialect))

    def _bound(self, params: dict[str, object], *, schema: str, base: str,
               data_terms: dict[str, tuple[str, ...]] | None) -> tuple[dict[str, object], dict[str, Any]]:
        """(checked parameter values, their SPARQL terms) for ``schema``."""
        if schema not in self.schemas:
            raise BadParameter(
                f"query {self.name!r} runs on the {' / '.join(self.schemas)} schema, "
                f"not {schema!r}")
        values = self.parse(params)
        terms: dict[str, Any] = {p.name: term_for(p, values[p.name], base=base)
                                 for p in self.parameters if values[p.name] is not None}
        for name, found in (data_terms or {}).items():
            if name in terms and found:
                # IRI terms only (as the store lookup gives them): checked, never pasted
                found = tuple(iri(t[1:-1] if t.startswith("<") and t.endswith(">") else t)
                              for t in found)
                terms[name] = found[0] if len(found) == 1 else found
        return values, terms

    def finish(self, columns: list[str], rows: list[list[Any]], *,
               sparql: str | None = None) -> list[list[Any]]:
        """Rows in this query's column order, pairs columns decoded; with the ``sparql``
        that produced them, sorted again by its final ORDER BY (see :func:`finish_rows`)."""
        return finish_rows(self, columns, rows, order=order_keys(sparql) if sparql else ())


_ORDER_ITEM = re.compile(r"(ASC|DESC|STR)?\(?\?(\w+)\)?", re.IGNORECASE)


def order_keys(sparql: str) -> list[tuple[str, bool]]:
    """``(variable, descending)`` of the last top-level ``ORDER BY`` line the builder wrote.

    >>> order_keys("SELECT ?a ?b WHERE { }\\nORDER BY DESC(?a) STR(?b)\\nLIMIT 3")
    [('a', True), ('b', False)]
    """
    lines = [line for line in sparql.splitlines() if line.startswith("ORDER BY ")]
    if not lines:
        return []
    return [(m.group(2), (m.group(1) or "").upper() == "DESC")
            for m in _ORDER_ITEM.finditer(lines[-1][len("ORDER BY "):])]


def _sort_key(value: Any) -> tuple[int, Any]:
    if value is None:
        return (0, 0)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return (1, value)
    return (2, str(value))


def finish_rows(query: CannedQuery, columns: list[str], rows: list[list[Any]], *,
                order: Sequence[tuple[str, bool]] = ()) -> list[list[Any]]:
    """Rows in the query's columns, pairs decoded, stably sorted by ``order``.

    The order is applied again here because not every endpoint keeps ORDER BY in what it
    sends: Virtuoso's Turtle results (which provkg reads for their exact doubles) come as an
    unordered graph. One mechanism for every store, so every store gives the same rows.
    """
    if query.latest_by and all(c in columns for c in query.latest_by):
        rows = _latest(rows, columns.index(query.latest_by[0]), columns.index(query.latest_by[1]))
    # sorted before the columns are picked: a query may order by a variable it projects for
    # the order only (q7 by a checking stage's measure); pairs columns are no sort key
    for var, descending in reversed(list(order)):
        if var in columns and var not in query.pair_columns:
            k = columns.index(var)
            rows = sorted(rows, key=lambda r: _sort_key(r[k]), reverse=descending)
    index = [columns.index(c) if c in columns else None for c in query.columns]
    out = []
    for row in rows:
        new = [row[i] if i is not None else None for i in index]
        for c in query.pair_columns:
            k = query.columns.index(c)
            new[k] = format_pairs(new[k])
        out.append(new)
    if query.pair_columns:  # the same pairs in another GROUP_CONCAT order: one DISTINCT row
        out = [list(r) for r in dict.fromkeys(tuple(r) for r in out)]
    return out


def _latest(rows: list[list[Any]], key: int, when: int) -> list[list[Any]]:
    """The rows whose ``when`` is the latest of their ``key`` (an epoch run again after a
    resume: its last execution)."""
    latest: dict[Any, Any] = {}
    for row in rows:
        if row[key] not in latest or _sort_key(row[when]) > _sort_key(latest[row[key]]):
            latest[row[key]] = row[when]
    return [row for row in rows if row[when] == latest[row[key]]]


def _p(name: str, type: str, default: object = REQUIRED, help: str = "", **kw: Any) -> Parameter:
    return Parameter(name, type, default, help, **kw)


_MODEL = _p("model", "data", help="the trained model: its value id or location URI")
_DATASET = _p("dataset", "data", help="the learning dataset: its value id or location URI")
#: the same, for queries about the trainings that used it (q3, q4, q7)
_DATASET_USED = _p("dataset", "data", help="the learning dataset: its value id or location URI",
                   users=True)
_WORKFLOW = _p("workflow", "workflow", help="the prospective (spec) workflow name")
_TRAINING = _p("training", "task", help="the training task id")


def _measure(default: str) -> Parameter:
    return _p("measure", "str", default, "an evaluation-measure attribute of the spec")


#: which way the measure is better, when its name does not say it (lower_is_better guesses)
_BETTER = _p("better", "better", None, "lower or higher: which values of the measure are better "
             "(default: guessed from its name, e.g. loss lower, accuracy higher)")


#: "the best training" by the measure of its last epoch, for trainings that recorded the
#: measure per epoch only (the README's capture example): tried when the training-level
#: measure finds nothing
_LAST_EPOCH = (("measure_at", "last_epoch"),)


#: which stage's measure ranks the trainings (the queries that take ``measure``)
_STAGE = _p("stage", "stage", "training", "whose measure ranks the trainings: the training's "
            "own, or that of the validation / evaluation that checked its model")
_SEISMIC = "seismic"


def _k() -> Parameter:
    return _p("k", "int", 3, "how many trainings", minimum=1)


def _builder_queries() -> list[CannedQuery]:
    L, D = lifecycle, dnnprov
    hp = ("hyperparameters",)
    return [
        CannedQuery("q1", "Given a trained model, the coordinates, basin, field and number of "
                    "slices of the seismic data in its training dataset (PROV-ML Q1)", (_MODEL,),
                    ("seismic_file", "coordinates", "basin", "field", "slices"), build=L.q1,
                    domain=_SEISMIC),
        CannedQuery("q2", "Given a trained model, the tile size, noise threshold and slice range "
                    "selected to make its training set (PROV-ML Q2)", (_MODEL,),
                    ("tile_size", "noise_threshold", "slice_start", "slice_end"), build=L.q2,
                    domain=_SEISMIC),
        CannedQuery("q3", "Given a training set, the hyperparameters and evaluation measures of "
                    "the model with the least measure (PROV-ML Q3)",
                    (_DATASET_USED, _measure("loss"), _BETTER, _STAGE), ("model", "role", "name", "value"),
                    build=L.q3, fallback=_LAST_EPOCH),
        CannedQuery("q4", "Average, min and max batch times per epoch of the trainings that used "
                    "a dataset (PROV-ML Q4)", (_DATASET_USED,),
                    ("training", "epoch", "batches", "avg_seconds", "min_seconds", "max_seconds"),
                    build=L.q4),
        CannedQuery("q5", "Average batch time per epoch and the model evaluations of trainings on "
                    "the dataset made from a slice range (PROV-ML Q5)",
                    (_p("slice_start", "int", help="first seismic slice"),
                     _p("slice_end", "int", help="last seismic slice")),
                    ("training", "epoch", "avg_batch_seconds", "model", "measure", "value"),
                    build=L.q5, domain=_SEISMIC),
        CannedQuery("q6", "Given a training set, the seismic file it came from, its number of "
                    "slices, basin and field (PROV-ML Q6)", (_DATASET,),
                    ("seismic_file", "slices", "basin", "field"), build=L.q6, domain=_SEISMIC),
        CannedQuery("q7", "Best batch measure per model in training and validation (the least "
                    "loss; the greatest of a higher-is-better measure such as accuracy), with its "
                    "hyperparameters and evaluations, best models first (PROV-ML Q7)",
                    (_DATASET_USED, _measure("loss"), _BETTER, _STAGE),
                    ("model", "training_min_batch_loss", "hyperparameters", "evaluations",
                     "validation_min_batch_loss", "validation_evaluations"), build=L.q7,
                    pair_columns=("hyperparameters", "evaluations", "validation_evaluations")),
        CannedQuery("d1", "The measure at an epoch of a training (DNNProv Q1)",
                    (_TRAINING, _p("epoch", "int", help="epoch index"), _measure("loss")),
                    ("value",), build=D.d1),
        CannedQuery("d2", "The layers (model-schema entries) of a model (DNNProv Q2)", (_MODEL,),
                    ("name", "value"), build=D.d2),
        CannedQuery("d3", "Time and measure of each epoch of a training (DNNProv Q3)",
                    (_TRAINING, _measure("loss")), ("epoch", "seconds", "loss"), build=D.d3),
        CannedQuery("d4", "The initial learning rate of the best training (DNNProv Q4)",
                    (_WORKFLOW, _measure("accuracy"), _BETTER, _STAGE), ("training", "learning_rate", "value"),
                    build=D.d4, fallback=_LAST_EPOCH),
        CannedQuery("d5", "Hyperparameters of the k best trainings (DNNProv Q5)",
                    (_WORKFLOW, _k(), _measure("accuracy"), _BETTER, _STAGE),
                    ("training", "value", "hyperparameters"), build=D.d5,
                    fallback=_LAST_EPOCH, pair_columns=hp),
        CannedQuery("d6", "Learning-rate adaptations of the best training: epoch, technique, new "
                    "value (DNNProv Q6)", (_WORKFLOW, _measure("accuracy"), _BETTER, _STAGE),
                    ("training", "epoch", "technique", "new_value"), build=D.d6, fallback=_LAST_EPOCH,
                    precondition=D.d6_precondition),
        CannedQuery("d7", "The filter applied when a hyperparameter had a value (DNNProv Q7)",
                    (_WORKFLOW, _p("hyperparameter", "str", help="hyperparameter name"),
                     _p("value", "scalar", help="its value, e.g. 0.4")),
                    ("training", "filter"), build=D.d7),
        CannedQuery("d8", "Filter and number of epochs of the best and the worst trainings "
                    "(DNNProv Q8)", (_WORKFLOW, _measure("accuracy"), _BETTER, _STAGE),
                    ("training", "rank", "filter", "epochs"), build=D.d8, fallback=_LAST_EPOCH),
        CannedQuery("p1", "Elapsed time and training loss of the latest epoch per hyperparameter "
                    "combination (ProvLight)", (_WORKFLOW,),
                    ("training", "hyperparameters", "epoch", "seconds", "loss"), build=D.p1,
                    pair_columns=hp, latest_by=("training", "end")),
        CannedQuery("p2", "Hyperparameters of the k best trainings (ProvLight)",
                    (_WORKFLOW, _k(), _measure("accuracy"), _BETTER, _STAGE),
                    ("training", "value", "hyperparameters"), build=D.p2,
                    fallback=_LAST_EPOCH, pair_columns=hp),
        CannedQuery("s1", "Lineage of a data item back to its inputs: each derivation edge, "
                    "the invocation behind it and its distance (S-PROV)",
                    (_p("data", "data", help="the data item: its value id or location URI"),
                     _p("depth", "int", 5, "how many derivation steps back", minimum=1)),
                    ("data", "derived_from", "invocation", "depth"), schemas=(Schema.SPROV.value,),
                    build=sprov.s1),
    ]


def _generic_queries() -> list[CannedQuery]:
    """Questions about any captured workflow, asked in the PROV terms every schema shares."""
    return [
        CannedQuery("lineage", "Everything a data item or model was derived from, hop by hop, "
                    "back to raw data and domain-KG resources: each edge, the activity behind it "
                    "and its distance",
                    (_p("data", "data", help="the data item or model: its value id or location URI"),
                     _p("depth", "int", 10, "how many hops back", minimum=1)),
                    ("data", "derived_from", "activity", "depth"), build=generic.lineage),
        CannedQuery("impact", "Everything derived from a data item, hop by hop (what to redo "
                    "when it is found bad): each edge, the activity behind it and its distance",
                    (_p("data", "data", help="the data item: its value id or location URI"),
                     _p("depth", "int", 10, "how many hops forward", minimum=1)),
                    ("data", "derived", "activity", "depth"), build=generic.impact),
        CannedQuery("runs", "Every training of a workflow's runs: its run and the run's label, "
                    "status, start, duration, hyperparameters and evaluations",
                    (_WORKFLOW,),
                    ("training", "run", "label", "status", "started", "seconds", "hyperparameters",
                     "evaluations"), build=generic.runs,
                    pair_columns=("hyperparameters", "evaluations")),
        CannedQuery("workflows", "Every workflow in the store by name, with how many runs and "
                    "trainings of it are stored", (), ("workflow", "runs", "trainings"),
                    build=browse.workflows),
        CannedQuery("data", "The datasets a workflow's trainings used and the models they "
                    "generated, with the training (starts for lineage and impact)", (_WORKFLOW,),
                    ("data", "role", "training"), build=browse.data),
        CannedQuery("measures", "The measures each training of a workflow generated, and "
                    "each validation and evaluation that checked it: a row per stage and measure",
                    (_WORKFLOW,), ("training", "stage", "measure", "value"), build=browse.measures),
        CannedQuery("epochs", "Each epoch of a training and of the validations and evaluations "
                    "that checked it: index, seconds and every measure, a row per measure (a "
                    "stage's own measures have no epoch)", (_TRAINING,),
                    ("stage", "epoch", "seconds", "measure", "value"), build=browse.epochs),
        CannedQuery("batches", "A batch measure of a training, one row per epoch: how many "
                    "batches had it and its min, avg and max over them (a 60,000-batch curve as "
                    "one band per epoch, from the rollups where the store keeps them)",
                    (_TRAINING, _measure("loss")),
                    ("epoch", "batches", "min_value", "avg_value", "max_value"), build=browse.batches),
        CannedQuery("adaptations", "Learning-rate adaptations of a training: epoch, technique, "
                    "new value (d6 for a given training)", (_TRAINING,),
                    ("training", "epoch", "technique", "new_value"), build=dnnprov.adaptations,
                    precondition=dnnprov.adaptations_precondition),
        CannedQuery("about", "The statements about a resource (a captured node or a domain-KG "
                    "resource): property, value and direction (out: it is the subject), at most "
                    f"{browse.ABOUT_LIMIT} each way",
                    (_p("resource", "iri", help="the resource's IRI"),),
                    ("direction", "property", "value"), build=browse.about),
    ]


def parse_rq(text: str, *, source: str = "<string>") -> CannedQuery:
    """A canned query from ``.rq`` text (the header of :mod:`provkg.queries.rq`)."""
    return CannedQuery(**read_rq(text, source=source))


@cache
def _catalog() -> dict[str, CannedQuery]:
    queries = [*_builder_queries(), *(parse_rq(text, source=path) for text, path in rq_texts()),
               *_generic_queries()]
    return {q.name: q for q in queries}


def canned_queries() -> list[CannedQuery]:
    """Every canned query, in catalog order (q*, d*, p*, s*, then lineage, impact, runs)."""
    return list(_catalog().values())


def get_query(name: str) -> CannedQuery:
    """The canned query called ``name``.

    Raises:
        UnknownQuery: listing the names that exist.
    """
    try:
        return _catalog()[name]
    except KeyError:
        raise UnknownQuery(
            f"no canned query named {name!r}; known: {', '.join(_catalog())}") from None


def render(name: str, params: dict[str, object], *, schema: str = "typed",
           base: str = DEFAULT_BASE, dialect: str = "standard") -> str:
    """The SPARQL of canned query ``name`` for ``params`` (see :meth:`CannedQuery.render`)."""
    return get_query(name).render(params, schema=schema, base=base, dialect=dialect)
