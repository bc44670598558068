"""Clauses per query part, typed (PROV-ML) vs tagged (PROVLake), next to the paper's Table 3.

The counts come from the parts the canned queries are built from
(:mod:`provkg.queries.parts`), rendered for Q7's variables as in Listings 1-2.

>>> [(r.part, r.typed, r.tagged) for r in clause_counts()][:2]
[('Training stage', 1, 4), ('Epoch iteration', 2, 5)]
"""

from __future__ import annotations

from dataclasses import dataclass

from provkg.queries import parts as P

__all__ = ["PAPER_TABLE_3", "ClauseCount", "clause_counts", "q7_parts"]

#: Table 3 of the PROV-ML paper: Q7 part -> (clauses with PROV-ML, without)
PAPER_TABLE_3: dict[str, tuple[int, int]] = {
    "Training stage": (1, 4),
    "Epoch iteration": (2, 5),
    "Model hyperparameters": (6, 7),
    "Model": (2, 5),
    "Model evaluation": (3, 6),
}


@dataclass(frozen=True)
class ClauseCount:
    part: str
    typed: int
    tagged: int
    paper_typed: int
    paper_tagged: int


def q7_parts(schema: str) -> dict[str, P.Part]:
    """Q7's parts with the variables of the paper's Listings 1-2."""
    return {
        "Training stage": P.stage("?training", "training", schema),
        "Epoch iteration": P.section("?epoch_exec_training", "?training", "training", schema),
        "Model hyperparameters": P.hyperparameters(
            "?training", "?hyperparam_name", "?hyperparam_v", schema, var="?hyperparam"),
        "Model": P.model("?training", "?model_training", schema),
        "Model evaluation": P.model_evaluation("?epoch_exec_training", "?model_training_eval",
                                               "?model_training_eval_value", schema),
    }


def clause_counts() -> list[ClauseCount]:
    """Clause counts of each Q7 part in both schemas, with the paper's figures."""
    typed, tagged = q7_parts("typed"), q7_parts("tagged")
    return [ClauseCount(name, typed[name].clauses, tagged[name].clauses, *paper)
            for name, paper in PAPER_TABLE_3.items()]
