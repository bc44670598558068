"""Query parts as the PROV-ML paper splits them, each rendered for both schemas.

typed (PROV-ML): a class triple says what a node is (one clause).
tagged (PROVLake): a retrospective node is qualified through its prospective node and
that node's ``provlake:tag`` (retrospective -> prospective -> tag clauses).

A part is a list of triple patterns (one clause each), so clause counts per schema come
from the same code that writes the queries (``provkg bench clauses``). Arguments are
variable names (``"?training"``) or terms made by :mod:`provkg.term`, never user text.

A part renders as one ``{ ... }`` group per subject ("star"), in the order written.
Oxigraph and Virtuoso flatten such groups and plan the joins themselves; rdflib, which
sorts the patterns of one group by how many variables they bind (so independent
``?x a C`` patterns multiply), evaluates the groups in the written order instead. Queries
therefore list their parts from the bound parameters outwards.
"""

from __future__ import annotations

from dataclasses import dataclass

from provkg.errors import BadParameter
from provkg.schemas import LIFECYCLE_SCHEMAS, Schema
from provkg.term import literal

__all__ = [
    "SCHEMAS",
    "Part",
    "check_schema",
    "concept_value",
    "dataset",
    "domain_facts",
    "hyperparameters",
    "innermost_sections",
    "lineage",
    "link",
    "model",
    "model_evaluation",
    "named_value",
    "role_value",
    "section",
    "section_summary",
    "without_rollup",
    "stage",
    "stars",
    "workflow_stage",
    "workflow_tasks",
]

#: the schemas the lifecycle parts are written for (names, as parameters take them)
SCHEMAS = tuple(s.value for s in LIFECYCLE_SCHEMAS)

#: stage kind -> (typed execution class, tag of its prospective transformation)
_STAGES = {
    "training": ("provml:TrainingExecution", "Training"),
    "validation": ("provml:ValidationExecution", "Validation"),
    "evaluation": ("provml:EvaluationExecution", "Evaluation"),
    "adaptation": ("provkg:AdaptationExecution", "Adaptation"),
}
#: stage kind -> typed prospective class of its transformation (the mapper's, docs/reference/graph.md)
_STAGE_TRANSFORMATIONS = {
    "training": "provml:Training",
    "validation": "provml:Validation",
    "evaluation": "provml:Evaluation",
    "adaptation": "provkg:Adaptation",
}
#: stage kind -> (typed class of its sections, tag of their transformation)
_SECTIONS = {
    "training": ("provml:TrainingSectionExecution", "TrainingSection"),
    "validation": ("provml:ValidationSectionExecution", "ValidationSection"),
    "evaluation": ("provml:EvaluationSectionExecution", "EvaluationSection"),
}
#: role -> (typed value class, typed prospective class, tag)
_ROLES = {
    "hyperparameter": ("provml:LearningHyperparameterValue", "provml:LearningHyperparameter",
                       "Hyperparameter"),
    "model_hyperparameter": ("provml:ModelHyperparameterValue", "provml:ModelHyperparameter",
                             "ModelHyperparameter"),
    "model": ("provml:Model", "provml:ModelProspection", "Model"),
    "model_schema": ("provml:ModelSchemaValue", "provml:ModelSchema", "ModelSchema"),
    "evaluation_measure": ("provml:ModelEvaluation", "provml:EvaluationMeasure", "ModelEvaluation"),
    "dataset": ("provml:LearningDataset", "provml:LearningDatasetReference", "Dataset"),
}


@dataclass(frozen=True)
class Part:
    """Triple patterns that together express one concept of a query."""

    name: str
    patterns: tuple[str, ...]
    extra: tuple[str, ...] = ()  # FILTER / BIND lines: not counted as clauses

    @property
    def clauses(self) -> int:
        return len(self.patterns)

    def sparql(self) -> str:
        return "\n".join([*stars(self.patterns), *self.extra])

    def __add__(self, other: Part) -> Part:
        return Part(self.name, self.patterns + other.patterns, self.extra + other.extra)


def stars(patterns: tuple[str, ...] | list[str]) -> list[str]:
    """Patterns as ``{ ... }`` groups, one per subject, in order of first appearance."""
    by_subject: dict[str, list[str]] = {}
    for p in patterns:
        by_subject.setdefault(p.split(None, 1)[0], []).append(p)
    return ["{ " + " . ".join(group) + " . }" for group in by_subject.values()]


def link(*patterns: str, name: str = "link") -> Part:
    """Plain triple patterns as a part (so they render as groups like every other part)."""
    return Part(name, patterns)


def check_schema(schema: str, allowed: tuple[str, ...] = SCHEMAS) -> str:
    if schema not in allowed:
        raise BadParameter(f"schema: expected one of {', '.join(allowed)}, not {schema!r}")
    return schema


def _tagged_kind(var: str, tag: str) -> tuple[str, ...]:
    """Retrospective -> prospective -> tag: the three clauses PROVLake needs to say a kind."""
    spec = f"{var}_spec"
    return (f"{var} prov:wasInfluencedBy {spec}", f"{spec} a provlake:DataTransformation",
            f"{spec} provlake:tag {literal(tag)}")


def stage(var: str, kind: str, schema: str) -> Part:
    """``var`` is an execution of a training / validation / evaluation / adaptation stage."""
    cls, tag = _STAGES[kind]
    if Schema(schema).typed_classes:
        return Part(f"{kind} stage", (f"{var} a {cls}",))
    return Part(f"{kind} stage",
                (f"{var} a provlake:DataTransformationExecution", *_tagged_kind(var, tag)))


def section(var: str, parent: str, kind: str, schema: str) -> Part:
    """``var`` is a section (epoch, batch) directly inside ``parent``, of a ``kind`` stage."""
    cls, tag = _SECTIONS[kind]
    head = f"{var} prov:wasInformedBy {parent}"
    if Schema(schema).typed_classes:
        return Part(f"{kind} section", (head, f"{var} a {cls}"))
    return Part(f"{kind} section",
                (head, f"{var} a provlake:DataTransformationExecution", *_tagged_kind(var, tag)))


def innermost_sections(stage_var: str, var: str) -> Part:
    """``var`` is an innermost section transformation (no section is part of it,
    ``provkg:innermost``) directly of the stage ``stage_var``'s transformation: a validation's
    batches without epochs.

    From the spec's side, before any execution: one lookup from the stage to its
    transformation, then its innermost sections (none when each has sections of its own, as
    epochs of batches). Only a section's transformation is part of another transformation
    (docs/reference/graph.md), so the stage's kind says the section's: no class or tag clause. The
    positive marker, not a FILTER NOT EXISTS: Oxigraph places that filter after every other
    pattern, so each epoch's measures were read first (Q7 with summaries 34 -> 107 ms)."""
    stage_t = f"{stage_var}_spec"  # the tagged stage part's name: one lookup, not two
    return Part("innermost section", (f"{stage_var} prov:wasInfluencedBy {stage_t}",
                                      f"{var} provlake:isPartOf {stage_t}",
                                      f"{var} provkg:innermost true"))


def section_summary(parent: str, var: str, *, measure: str | None = None,
                    **stats: str) -> Part:
    """The summary ``var`` of the sections of ``parent`` kept at ``granularity: summary``
    (docs/reference/graph.md), the same in both schemas; ``stats`` maps summary properties
    (``executionCount``, ``timedCount``, ``minSeconds``, ``avgSeconds``, ``maxSeconds``) to
    variables;
    with ``measure`` (a name), ``stats`` may also name ``minValue`` / ``avgValue`` /
    ``maxValue`` of that measure's summary ``{var}_m``."""
    value_stats = {"minValue", "avgValue", "maxValue", "valueCount"}
    # with a measure, provkg:hasMeasureSummary says it is a summary: the type would cost one
    # more lookup per section
    # from the parent in one lookup (prov:wasGeneratedBy would also walk its models and measures)
    patterns = [f"{parent} provkg:hasSectionSummary {var}"]
    if not measure:
        patterns.append(f"{var} a provkg:SectionSummary")
    patterns += [f"{var} provkg:{k} {v}" for k, v in stats.items() if k not in value_stats]
    if measure:
        m = f"{var}_m"
        patterns += [f"{var} provkg:hasMeasureSummary {m}", f"{m} prov:wasDerivedFrom {m}_attr",
                     f"{m}_attr rdfs:label {measure}"]
        patterns += [f"{m} provkg:{k} {v}" for k, v in stats.items() if k in value_stats]
    return Part("section summary", tuple(patterns))


def without_rollup(pattern: str, parent: str) -> str:
    """``pattern`` (one that binds ``parent``, and only it of the filter's variables) where
    ``parent`` has no rollup (``provkg:hasSectionSummary``): the full-detail branch of a
    query answers for such parents, the rollup branch for the others. A rollup is computed
    from the very events the detail holds (granularity ``both``), so either gives the same
    figures; the rollup reads one node instead of every batch.

    The filter sits in a group of its own with ``pattern``: there Oxigraph drops a rolled-up
    parent before it reads its batches (Q7 typed at scale 0.1: 10 ms, 192 ms without the
    rollups), where beside the batch patterns it ran after all of them (no faster than
    without rollups) and in one group with the parent's class pattern after a scan of them."""
    return f"{{ {pattern} . FILTER NOT EXISTS {{ {parent} provkg:hasSectionSummary ?rolled_up }} }}"


def role_value(var: str, role: str | tuple[str, ...], schema: str, *, name: str | None = None,
               with_value: str | None = None) -> tuple[str, ...]:
    """Clauses saying ``var`` is a value of ``role`` (and optionally its name / literal).
    Of several roles, the class / tag is a variable that :func:`role_filter` restricts."""
    roles = (role,) if isinstance(role, str) else role
    attr = f"{var}_attr"
    if len(roles) == 1:
        value_cls, prosp_cls, tag = _ROLES[roles[0]]
        tag = literal(tag)
    else:
        value_cls, prosp_cls, tag = f"{var}_cls", f"{attr}_cls", f"{attr}_tag"
    value = (f"{var} prov:value {with_value}",) if with_value else ()
    label = (f"{attr} rdfs:label {name}",) if name else ()
    if Schema(schema).typed_classes:
        if not name:  # the class alone says what the value is
            return (f"{var} a {value_cls}", *value)
        return (f"{var} a {value_cls}", *value, f"{var} prov:wasDerivedFrom {attr}",
                f"{attr} a {prosp_cls}", *label)
    return (f"{var} a provlake:AttributeValue", *value, f"{var} prov:wasDerivedFrom {attr}",
            f"{attr} a provlake:Attribute", f"{attr} provlake:tag {tag}", *label)


def role_filter(var: str, roles: tuple[str, ...], schema: str, *, named: bool = True) -> tuple[str, ...]:
    """The FILTERs that keep :func:`role_value` of several ``roles`` to those roles."""
    if len(roles) == 1:
        return ()
    attr = f"{var}_attr"
    if Schema(schema).typed_classes:
        out = [f"FILTER({var}_cls IN ({', '.join(_ROLES[r][0] for r in roles)}))"]
        if named:
            out.append(f"FILTER({attr}_cls IN ({', '.join(_ROLES[r][1] for r in roles)}))")
        return tuple(out)
    return (f"FILTER({attr}_tag IN ({', '.join(literal(_ROLES[r][2]) for r in roles)}))",)


#: what "the hyperparameters" of a training are: learning ones (learning rate, batch size)
#: and model ones (dropout, layer widths)
_HYPERPARAMETER_ROLES = ("hyperparameter", "model_hyperparameter")


def hyperparameters(stage_var: str, name: str, value: str, schema: str, *,
                    var: str = "?hp") -> Part:
    """The hyperparameter values ``stage_var`` used, with their names (from the prospective
    attribute, so both schemas need that hop; tagged adds the tag), learning and model
    hyperparameters both."""
    return Part("model hyperparameters",
                (f"{stage_var} prov:used {var}",
                 *role_value(var, _HYPERPARAMETER_ROLES, schema, name=name, with_value=value)),
                role_filter(var, _HYPERPARAMETER_ROLES, schema))


def checking_shapes(anchor: list[str | Part], training: str,
                    var: str) -> tuple[list[str | Part], list[str | Part]]:
    """The two shapes of "``var`` checked ``training``" a capture gives, each with the anchor
    (a UNION branch is evaluated on its own): it used a value the training generated (its
    model; by the id or by the location alone), or it is informed by the training (a child of
    it, or a stage depending on it). ``var``'s stage is the caller's (:func:`stage`)."""
    out = f"{var}_out"
    return ([*anchor, link(f"{out} prov:wasGeneratedBy {training}"), use_of_value(var, out)],
            [*anchor, link(f"{var} prov:wasInformedBy {training}")])


def model(stage_var: str, var: str, schema: str) -> Part:
    """The model ``stage_var`` generated."""
    return Part("model", (f"{var} prov:wasGeneratedBy {stage_var}",
                          *role_value(var, "model", schema)))


def model_evaluation(exec_var: str, var: str, value: str, schema: str, *,
                     name: str | None = None) -> Part:
    """Evaluation-measure values ``exec_var`` generated; ``name`` (a variable or a literal)
    also matches the measure's name, which needs the prospective hop in both schemas."""
    clauses = role_value(var, "evaluation_measure", schema, with_value=value)
    if name:
        attr = f"{var}_attr"
        if Schema(schema).typed_classes:
            clauses += (f"{var} prov:wasDerivedFrom {attr}", f"{attr} rdfs:label {name}")
        else:
            clauses += (f"{attr} rdfs:label {name}",)
    return Part("model evaluation", (f"{var} prov:wasGeneratedBy {exec_var}", *clauses))


def use_of_value(task: str, var: str) -> Part:
    """``task`` used the value ``var`` (bound): by its id, or by its location alone (a
    ``capture.ref(path)`` value, the ``provkg:locationOf`` the value with the id). Another
    value at the same path (a model fine-tuned from this one and saved over it) is not."""
    # a zero-or-one path from the bound value, not a UNION: Oxigraph evaluates a UNION's
    # branches on their own, and `?task prov:used ?var` alone reads every use in the store
    # (q7 at full scale: 6 s -> 107 s)
    v = f"{task}_v"
    return Part("use of value", (f"{var} ^provkg:locationOf? {v}", f"{task} prov:used {v}"))


def dataset(stage_var: str, var: str, schema: str) -> Part:
    """The learning dataset ``stage_var`` used."""
    return Part("dataset", (f"{stage_var} prov:used {var}", *role_value(var, "dataset", schema)))


def named_value(task: str, var: str, value: str, name: str, *, used: bool) -> Part:
    """The value of the attribute called ``name`` that ``task`` used (or generated); the same
    clauses in both schemas (plain attributes carry no class and no tag)."""
    link = f"{task} prov:used {var}" if used else f"{var} prov:wasGeneratedBy {task}"
    return Part(f"value {name}", (link, f"{var} prov:wasDerivedFrom {var}_attr",
                                  f"{var}_attr rdfs:label {name}", f"{var} prov:value {value}"))


def concept_value(task: str, var: str, value: str, concept: str, *, used: bool) -> Part:
    """The value ``task`` used (or generated) whose attribute holds domain ``concept``."""
    link = f"{task} prov:used {var}" if used else f"{var} prov:wasGeneratedBy {task}"
    return Part(f"value of {concept}", (link, f"{var} prov:wasDerivedFrom {var}_attr",
                                        f"{var}_attr provlake:concept {concept}",
                                        f"{var} prov:value {value}"))


def lineage(start: str, ancestor: str) -> Part:
    """``ancestor`` is ``start`` or one of the values it came from, transitively: derived
    from, or an input of the task that generated it (the same in both schemas)."""
    return Part("dataset lineage",
                (f"{start} (prov:wasDerivedFrom|prov:wasGeneratedBy/prov:used)* {ancestor}",))


#: a node no triple has: keeps a variable bound when the KG has nothing for it, so the
#: OPTIONALs after it look it up (an unbound variable would match every triple there)
_NONE = "<urn:provkg:none>"
_NONE_TEXT = '"urn:provkg:none"'


def _one_label(node: str, label: str) -> tuple[str, ...]:
    """``label``: one label of ``node`` (a row per label would repeat the answer per language):
    the least untagged or English one, else the least of any language (one aggregate: the
    preference is the first character of the key)."""
    each, key = f"{label}_l", f"{label}_key"
    preferred = f'LANG({each}) = "" || LANGMATCHES(LANG({each}), "en")'
    return (f"OPTIONAL {{ SELECT {node} (MIN(CONCAT(IF({preferred}, \"0\", \"1\"), STR({each}))) "
            f"AS {key}) WHERE {{ {node} rdfs:label {each} }} GROUP BY {node} }}",
            f"BIND(SUBSTR({key}, 2) AS {label})")


def domain_facts(value: str, file: str, basin: str, field: str) -> Part:
    """A captured value that denotes a SEG-Y file of the domain KG, with the basin and field
    the KG gives it (as their labels, or the IRI when a resource has no label), as the
    seismic ontology allows them to be stated: on each survey of the file (a row per survey:
    ``{file}_holder`` is that survey), else on the file itself; a basin also through the
    field. A file the KG gives neither has a row with no basin and no field."""
    holder = f"{file}_holder"
    return Part("domain facts", (f"{value} provlake:denotes {file}", f"{file} a seis:SegyFile"),
        extra=(f"OPTIONAL {{ {file} seis:survey {file}_survey }}",
               f"BIND(COALESCE({file}_survey, {file}) AS {holder})",
               f"OPTIONAL {{ {holder} seis:field {field}_held }}",
               f"OPTIONAL {{ {file} seis:field {field}_own }}",
               f"BIND(COALESCE({field}_held, {field}_own, {_NONE}) AS {field}_node)",
               f"OPTIONAL {{ {holder} seis:basin {basin}_held }}",
               f"OPTIONAL {{ {file} seis:basin {basin}_own }}",
               f"OPTIONAL {{ {field}_node seis:basin {basin}_of_field }}",
               f"BIND(COALESCE({basin}_held, {basin}_own, {basin}_of_field, {_NONE}) "
               f"AS {basin}_node)",
               *_one_label(f"{basin}_node", f"{basin}_label"),
               *_one_label(f"{field}_node", f"{field}_label"),
               # (by its text: Virtuoso's COALESCE gives the IRI back as a string)
               f"BIND(IF(STR({basin}_node) = {_NONE_TEXT}, ?provkg_unbound, "
               f"COALESCE({basin}_label, STR({basin}_node))) AS {basin})",
               f"BIND(IF(STR({field}_node) = {_NONE_TEXT}, ?provkg_unbound, "
               f"COALESCE({field}_label, STR({field}_node))) AS {field})"))


def workflow_tasks(wf_spec: str, task: str) -> Part:
    """``task`` executes a transformation of the prospective workflow ``wf_spec``."""
    return Part("workflow", (f"{task}_tr provlake:isPartOf {wf_spec}",
                             f"{task} prov:wasInfluencedBy {task}_tr"))


def workflow_stage(wf_spec: str, var: str, kind: str, schema: str) -> Part:
    """``var`` is an execution of a ``kind`` stage of the prospective workflow ``wf_spec``,
    reached through that stage's transformation (a handful per workflow) rather than every
    task of the workflow (each batch is one): typed, the transformation's class; tagged,
    its tag (the same clauses :func:`stage` uses, on the same node)."""
    spec = f"{var}_spec"
    head = (f"{spec} provlake:isPartOf {wf_spec}",)
    link = (f"{var} prov:wasInfluencedBy {spec}",)
    if Schema(schema).typed_classes:
        return Part(f"workflow {kind} stage", (*head, f"{spec} a {_STAGE_TRANSFORMATIONS[kind]}",
                                               *link, f"{var} a {_STAGES[kind][0]}"))
    return Part(f"workflow {kind} stage",
                (*head, f"{spec} a provlake:DataTransformation",
                 f"{spec} provlake:tag {literal(_STAGES[kind][1])}", *link,
                 f"{var} a provlake:DataTransformationExecution"))
