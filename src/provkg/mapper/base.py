"""The PROV base layer every schema writes (docs/reference/graph.md, "What any PROV tool reads").

PROV tools do not reason: a node typed only ``provml:TrainingExecution`` is no activity to
them. So next to its schema's class every execution is also ``a prov:Activity``, every
value ``a prov:Entity``, every agent ``a prov:Agent`` and every prospective workflow and
transformation ``a prov:Plan, prov:Entity`` (``prov:Plan`` alone is not an entity to a
tool that does not read PROV-O), identically in the typed, tagged and S-PROV schemas.

Qualified associations, each minted from its execution (no blank nodes)::

    <X> prov:qualifiedAssociation <association/KIND/ID> .       # KIND run | task, stated by X's begin
    <association/KIND/ID> a prov:Association ; prov:agent <software/R> ; prov:hadPlan <PLAN> .
    <software/R> a prov:SoftwareAgent, prov:Agent ; [prov:actedOnBehalfOf <agent/A>] .

and for every ``<X> prov:wasAssociatedWith <Y>`` the mapper writes (the event's ``agent``,
an S-PROV component instance) ``<association/KIND/ID/Y>`` with ``prov:agent <Y>`` and the
same plan, so a tool that reconciles binary and qualified forms (the ``prov`` package)
finds one association per agent. ``<software/R>`` is the captured program of run R: a
task event does not carry its run's agent and may come in another session than the run's
begin, so the run's agent cannot be named per task without reading the store.
"""

from __future__ import annotations

from provkg.mapper.common import Minter
from provkg.mapper.terms import A, P, term_of
from provkg.term import Triple
from provkg.vocab import PROV

__all__ = ["ACTIVITY", "AGENT", "ENTITY", "PLAN_TYPES", "associate", "association_node", "default_association",
           "software_agent", "software_agent_triples"]

ACTIVITY = P.Activity
ENTITY = P.Entity
AGENT = P.Agent
SOFTWARE_AGENT = term_of(PROV.term("SoftwareAgent"))
ASSOCIATION = term_of(PROV.term("Association"))
QUALIFIED_ASSOCIATION = term_of(PROV.term("qualifiedAssociation"))
HAS_AGENT = term_of(PROV.term("agent"))
HAD_PLAN = term_of(PROV.term("hadPlan"))

#: the types of a prospective workflow or transformation: ``prov:Entity`` as well, which
#: ``prov:Plan`` implies only to a reasoner
PLAN_TYPES = (P.Plan, P.Entity)


def software_agent(mint: Minter, run_id: str) -> str:
    """``<software/R>``: the captured program that ran run ``run_id``."""
    return mint.other("software", run_id)


def software_agent_triples(mint: Minter, run_id: str) -> list[Triple]:
    """The types of ``<software/R>`` (written by the run's workflow events)."""
    agent = software_agent(mint, run_id)
    return [(agent, A, SOFTWARE_AGENT), (agent, A, AGENT)]


def default_association(mint: Minter, kind: str, execution_id: str, execution: str, run_id: str,
                        plan: str) -> list[Triple]:
    """The qualified association of an execution (``kind`` run or task) with its run's
    software agent under ``plan``."""
    node = mint.other("association", kind, execution_id)
    return [(execution, QUALIFIED_ASSOCIATION, node), (node, A, ASSOCIATION),
            (node, HAS_AGENT, software_agent(mint, run_id)), (node, HAD_PLAN, plan)]


def association_node(mint: Minter, kind: str, execution_id: str, agent: str) -> str:
    """``<association/KIND/ID/AGENT>``: AGENT is the agent's IRI after the base ("agent/A",
    "instance/R/tr"), one part with its '/' encoded."""
    return mint.other("association", kind, execution_id, agent[len(mint.base) + 1:-1])


def associate(mint: Minter, kind: str, execution_id: str, execution: str, agent: str,
              plan: str) -> list[Triple]:
    """The qualified form of ``execution prov:wasAssociatedWith agent`` (an agent minted
    under the mapper's base), under ``plan``."""
    node = association_node(mint, kind, execution_id, agent)
    return [(execution, QUALIFIED_ASSOCIATION, node), (node, A, ASSOCIATION),
            (node, HAS_AGENT, agent), (node, HAD_PLAN, plan)]
