"""Tag-based PROVLake (Listing 2 of the PROV-ML paper): plain PROVLake classes,
qualified by ``provlake:tag`` strings on the prospective side only.
"""

from __future__ import annotations

from provkg.mapper.terms import P

__all__ = ["AGENT_CLASS", "KIND_TAG", "ROLE_TAG", "SECTION_TAG", "transformation_tag"]

#: spec kind -> tag of the prospective transformation (None: no tag)
KIND_TAG: dict[str, str | None] = {
    "training": "Training",
    "validation": "Validation",
    "evaluation": "Evaluation",
    "feature_extraction": "FeatureExtraction",
    "adaptation": "Adaptation",
    "transformation": None,
}

#: kind of the stage a section belongs to -> the section's tag
SECTION_TAG = {
    "training": "TrainingSection",
    "validation": "ValidationSection",
    "evaluation": "EvaluationSection",
}
DEFAULT_SECTION_TAG = "Section"

#: role -> tag of the prospective attribute (None: no tag)
ROLE_TAG: dict[str, str | None] = {
    "hyperparameter": "Hyperparameter",
    "model_hyperparameter": "ModelHyperparameter",
    "model": "Model",
    "model_schema": "ModelSchema",
    "evaluation_measure": "ModelEvaluation",
    "dataset": "Dataset",
    "dataset_characteristic": "DatasetCharacteristic",
    "feature_set": "FeatureSet",
    "data_reference": "DataReference",
    "domain_reference": "DomainReference",
    "plain": None,
}

AGENT_CLASS = P.Agent


def transformation_tag(kind: str, stage_kind: str | None) -> str | None:
    """The tag of a transformation of ``kind`` (sections: by the stage they belong to)."""
    if kind == "section":
        return SECTION_TAG.get(stage_kind or "", DEFAULT_SECTION_TAG)
    return KIND_TAG[kind]
