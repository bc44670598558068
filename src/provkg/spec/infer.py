"""A prospective spec from captured events: what each transformation and attribute *is*.

Events may carry their roles (wire format v1's optional ``kind`` and ``granularity`` on a
task's begin, ``role`` on a value, ``phase`` on a workflow's begin: what the framework
callbacks and ``wf.task(..., kind=...)`` send). :func:`infer_specs` turns them into specs:

- ``guess=False`` (what ingest does for a workflow without a written spec): only what the
  events say — a task with a parent is a section ``of`` the parent's transformation, a
  kind or role they carry is taken, everything else stays ``transformation`` / ``plain``
  (and a section ``full``: such a spec grows as events come, see :func:`_spec`);
  a workflow whose events say nothing of the kind has no spec;
- ``guess=True`` (``provkg spec infer``): also the kinds and roles names suggest (``train``
  a training, ``loss`` generated an evaluation measure, ``lr`` used a hyperparameter, a value
  with a location a data reference), each guess listed in :attr:`InferredSpec.guessed`.

>>> events = [
...     {"type": "workflow", "event": "begin", "id": "r", "time": 0, "workflow": "fit"},
...     {"type": "task", "event": "begin", "id": "t", "time": 1, "workflow_id": "r",
...      "transformation": "train", "kind": "training",
...      "used": [{"name": "lr", "value": 0.1, "role": "hyperparameter"}]},
...     {"type": "task", "event": "end", "id": "t", "time": 2, "workflow_id": "r",
...      "transformation": "train", "generated": [{"name": "loss", "value": 0.5}]}]
>>> found = infer_specs(events)["fit"]
>>> [(t.name, t.kind, [a.role for a in t.used], [a.role for a in t.generated])
...  for t in found.spec.transformations]
[('train', 'training', ['hyperparameter'], ['evaluation_measure'])]
>>> found.guessed
['train.loss: role evaluation_measure (from its name)']
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from provkg.spec.model import KINDS, ROLES, Attribute, Spec, Transformation

__all__ = ["InferredSpec", "infer_specs", "merge_specs", "spec_yaml"]

#: the kinds of stage a workflow of the learning phase has
_LEARNING_KINDS = frozenset({"training", "validation", "evaluation", "adaptation"})


@dataclass
class InferredSpec:
    """A workflow's spec as its events imply it, and what was guessed rather than said."""

    spec: Spec
    guessed: list[str] = field(default_factory=list)


@dataclass
class _Draft:
    """One transformation as the events so far describe it."""

    name: str
    kind: str | None = None
    kind_guessed: bool = False
    of: str | None = None
    granularity: str | None = None
    used: dict[str, tuple[str, bool]] = field(default_factory=dict)  # name -> (role, guessed)
    generated: dict[str, tuple[str, bool]] = field(default_factory=dict)


@dataclass
class _Workflow:
    name: str
    phase: str | None = None
    said: bool = False  # an event carried a kind, role or phase
    drafts: dict[str, _Draft] = field(default_factory=dict)


def infer_specs(events: Iterable[Mapping[str, Any]], *, guess: bool = True,
                runs: Mapping[str, str] | None = None,
                transformation_of: Mapping[str, str] | None = None) -> dict[str, InferredSpec]:
    """workflow name -> its :class:`InferredSpec`, from wire-format event dicts in any order
    (a task's run is matched by ``workflow_id``; a task whose run is neither among the events
    nor in ``runs``, run id -> workflow, is left out; ``transformation_of``, task id ->
    transformation, names parents begun before these events). See the module's docstring
    for ``guess``."""
    events = list(events)
    runs = {**(runs or {}), **{e["id"]: e["workflow"] for e in events
                               if e.get("type") == "workflow" and isinstance(e.get("workflow"), str)}}
    transformation_of = {**(transformation_of or {}), **{
        e["id"]: e["transformation"] for e in events
        if e.get("type") == "task" and isinstance(e.get("transformation"), str)}}
    flows: dict[str, _Workflow] = {}
    for e in events:
        if e.get("type") == "workflow":
            flow = flows.setdefault(e["workflow"], _Workflow(e["workflow"]))
            if isinstance(e.get("phase"), str):
                flow.phase, flow.said = e["phase"], True
            continue
        run = e.get("workflow_id")
        name = runs.get(run) if isinstance(run, str) else None
        if name is None or e.get("type") != "task":
            continue
        flow = flows.setdefault(name, _Workflow(name))
        _note_task(flow, e, transformation_of)
    out = {}
    for flow in flows.values():
        if flow.drafts and (guess or flow.said):
            out[flow.name] = _spec(flow, guess=guess)
    return out


def _note_task(flow: _Workflow, e: Mapping[str, Any], transformation_of: dict[str, str]) -> None:
    draft = flow.drafts.setdefault(e["transformation"], _Draft(e["transformation"]))
    kind = e.get("kind")
    if kind in KINDS:
        draft.kind, draft.kind_guessed, flow.said = kind, False, True
    parent_id = e.get("parent")
    parent = transformation_of.get(parent_id) if isinstance(parent_id, str) else None
    if parent is not None and parent != draft.name:
        flow.drafts.setdefault(parent, _Draft(parent))
        draft = flow.drafts[e["transformation"]]
        draft.of = draft.of or parent
        if draft.kind is None:
            draft.kind = "section"
    if e.get("granularity") in ("full", "summary", "both"):
        draft.granularity, flow.said = e["granularity"], True
    for key, into in (("used", draft.used), ("generated", draft.generated)):
        for item in e.get(key) or ():
            if not isinstance(item, Mapping) or not isinstance(item.get("name"), str):
                continue
            role = item.get("role")
            if role in ROLES:
                into[item["name"]] = (role, False)
                flow.said = True
            elif item["name"] not in into:
                into[item["name"]] = (_guess_role(item, generated=key == "generated"), True)


def _spec(flow: _Workflow, *, guess: bool) -> InferredSpec:
    guessed: list[str] = []
    transformations = []
    for d in flow.drafts.values():
        kind = d.kind
        if kind is None:
            kind = _guess_kind(d.name) if guess else "transformation"
            if guess and kind != "transformation":
                guessed.append(f"{d.name}: kind {kind} (from its name)")
        of = d.of if kind == "section" else None
        attrs: dict[str, list[Attribute]] = {}
        for key, found in (("used", d.used), ("generated", d.generated)):
            attrs[key] = []
            for name, (role, was_guessed) in found.items():
                if was_guessed and not guess:
                    role = "plain"
                elif was_guessed and role != "plain":
                    guessed.append(f"{d.name}.{name}: role {role} (from its name)")
                attrs[key].append(Attribute(name=name, role=role))  # type: ignore[arg-type]
        transformations.append(Transformation(
            name=d.name, kind=kind, of=of, used=attrs["used"], generated=attrs["generated"],  # type: ignore[arg-type]
            # ingest's captured specs grow as events come: a section left unset would be innermost
            # (``both``) until its own sections arrived, so there unsaid means ``full``
            granularity=(d.granularity or (None if guess else "full")) if kind == "section" else None))  # type: ignore[arg-type]
    kinds = {t.kind for t in transformations}
    phase = flow.phase if flow.phase in ("curation", "preparation", "learning") else (
        "learning" if kinds & _LEARNING_KINDS else "preparation")
    return InferredSpec(Spec(workflow=flow.name, phase=phase, transformations=transformations),  # type: ignore[arg-type]
                        guessed)


_KIND_WORDS = (("training", r"train|training|fit"), ("validation", r"val|valid|validation|validate"),
               ("evaluation", r"test|eval|evaluation|evaluate|predict|inference"),
               ("adaptation", r"adapt|adaptation|scheduler|lr_change"),
               ("feature_extraction", r"features?|feature_extraction|embed"))


def _words(name: str) -> set[str]:
    return {w for w in re.split(r"[^a-z0-9]+|(?<=[a-z])(?=[0-9])", name.lower()) if w}


def _guess_kind(name: str) -> str:
    words = _words(name)
    for kind, pattern in _KIND_WORDS:
        if any(re.fullmatch(pattern, w) for w in words):
            return kind
    return "transformation"


_MEASURES = re.compile(r"(loss|acc|accuracy|f1|precision|recall|auc|roc_auc|mse|mae|rmse|r2|"
                       r"score|error|perplexity|iou|dice|bleu|rouge)$")
_HYPERPARAMETERS = re.compile(r"(lr|learning_rate|batch_size|epochs|max_epochs|momentum|"
                              r"weight_decay|dropout|seed|optimizer|scheduler|gamma|step_size|"
                              r"warmup\w*|hidden\w*|layers|num_layers|units|alpha|beta\d?|eps)$")


def _guess_role(item: Mapping[str, Any], *, generated: bool) -> str:
    """The role a value's name and shape suggest (see the module's docstring)."""
    name = item["name"].lower()
    last = re.split(r"[./]", name)[-1]
    if "location" in item or "ref" in item:
        if re.search(r"model|checkpoint|ckpt|weights", name):
            return "model"
        if re.search(r"data|dataset|set|train|val|test|input|corpus|split", name):
            return "dataset"
        return "data_reference"
    value = item.get("value")
    if isinstance(value, (int, float)) and not isinstance(value, bool) and generated \
            and _MEASURES.search(last):
        return "evaluation_measure"
    if not generated and (_HYPERPARAMETERS.fullmatch(last) or name.startswith(("hparams.", "optimizer."))):
        return "hyperparameter"
    return "plain"


def merge_specs(held: Spec, found: Spec) -> Spec:
    """``held`` (a spec inferred earlier) with what ``found`` adds: new transformations and
    attributes; a kind or role ``found`` says replaces a ``transformation`` / ``plain`` one."""
    by_name = {t.name: t for t in found.transformations}
    merged = []
    for t in held.transformations:
        new = by_name.pop(t.name, None)
        merged.append(t if new is None else _merge_transformation(t, new))
    merged += by_name.values()
    phase = held.phase if held.phase == "learning" else found.phase
    return Spec(workflow=held.workflow, phase=phase, transformations=merged,
                data_stores=held.data_stores, description=held.description)


def _merge_transformation(old: Transformation, new: Transformation) -> Transformation:
    def attrs(a: list[Attribute], b: list[Attribute]) -> list[Attribute]:
        out = {x.name: x for x in a}
        for x in b:
            if x.name not in out or out[x.name].role == "plain":
                out[x.name] = x
        return list(out.values())
    kind = new.kind if old.kind == "transformation" else old.kind
    return Transformation(name=old.name, kind=kind, of=old.of or new.of, used=attrs(old.used, new.used),
                          generated=attrs(old.generated, new.generated),
                          # "full" is also what a captured draft says when its events said nothing
                          granularity=(new.granularity if new.granularity not in (None, "full")
                                       else old.granularity or new.granularity),
                          description=old.description)


def spec_yaml(found: InferredSpec) -> str:
    """The spec as YAML text (strings JSON-quoted, which YAML reads as they are), each guess
    marked ``# guessed``, to review before ``provkg spec register``."""
    spec = found.spec
    marks = {g.split(":", 1)[0] for g in found.guessed}
    q = _quoted
    lines = ["# inferred by `provkg spec infer` from captured events: review the lines marked",
             "# `# guessed` (kinds and roles read from names), then `provkg spec register FILE`",
             f"workflow: {q(spec.workflow)}", f"phase: {spec.phase}", "transformations:"]
    for t in spec.transformations:
        lines.append(f"  - name: {q(t.name)}")
        lines.append(f"    kind: {t.kind}" + ("  # guessed" if t.name in marks else ""))
        if t.of:
            lines.append(f"    of: {q(t.of)}")
        if t.kind == "section":  # spelled out: the reviewer sees what the draft keeps
            lines.append(f"    granularity: {spec.granularity(t.name)}")
        for key, attrs in (("used", t.used), ("generated", t.generated)):
            if attrs:
                lines.append(f"    {key}:")
                for a in attrs:
                    mark = "  # guessed" if f"{t.name}.{a.name}" in marks else ""
                    lines.append(f"      - {{name: {q(a.name)}, role: {a.role}}}{mark}")
    return "\n".join(lines) + "\n"


def _quoted(text: str) -> str:
    import json

    return json.dumps(text, ensure_ascii=False)
