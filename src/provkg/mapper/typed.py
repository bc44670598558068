"""Typed PROV-ML (the default schema): kinds and roles become PROV-ML classes.

A training stage is ``provml:Training`` on the prospective side and each run of it a
``provml:TrainingExecution``; a hyperparameter value is a
``provml:LearningHyperparameterValue``; and so on (docs/reference/graph.md, the two tables).
"""

from __future__ import annotations

from provkg.mapper.terms import PK, PL, PML

__all__ = [
    "AGENT_CLASS",
    "ATTRIBUTE_CLASS",
    "EXECUTION_CLASS",
    "SECTION_EXECUTION_CLASS",
    "TRANSFORMATION_CLASS",
    "VALUE_CLASS",
    "run_class",
]

#: spec kind -> prospective class
TRANSFORMATION_CLASS = {
    "training": PML.Training,
    "validation": PML.Validation,
    "evaluation": PML.Evaluation,
    "section": PML.LearningStageSection,
    "feature_extraction": PML.FeatureExtraction,
    "adaptation": PK.Adaptation,
    "transformation": PL.DataTransformation,
}

#: spec kind -> class of its executions (sections: see SECTION_EXECUTION_CLASS)
EXECUTION_CLASS = {
    "training": PML.TrainingExecution,
    "validation": PML.ValidationExecution,
    "evaluation": PML.EvaluationExecution,
    "feature_extraction": PML.FeatureExtractionExecution,
    "adaptation": PK.AdaptationExecution,
    "transformation": PL.DataTransformationExecution,
}

#: kind of the stage a section belongs to -> class of the section's executions
SECTION_EXECUTION_CLASS = {
    "training": PML.TrainingSectionExecution,
    "validation": PML.ValidationSectionExecution,
    "evaluation": PML.EvaluationSectionExecution,
}
DEFAULT_SECTION_EXECUTION_CLASS = PML.LearningSectionExecution

#: role -> prospective attribute class
ATTRIBUTE_CLASS = {
    "hyperparameter": PML.LearningHyperparameter,
    "model_hyperparameter": PML.ModelHyperparameter,
    "model": PML.ModelProspection,
    "model_schema": PML.ModelSchema,
    "evaluation_measure": PML.EvaluationMeasure,
    "dataset": PML.LearningDatasetReference,
    "dataset_characteristic": PML.DatasetCharacteristic,
    "feature_set": PML.FeatureSet,
    "data_reference": PL.Attribute,
    "domain_reference": PL.Attribute,
    "plain": PL.Attribute,
}

#: role -> class of its captured values
VALUE_CLASS = {
    "hyperparameter": PML.LearningHyperparameterValue,
    "model_hyperparameter": PML.ModelHyperparameterValue,
    "model": PML.Model,
    "model_schema": PML.ModelSchemaValue,
    "evaluation_measure": PML.ModelEvaluation,
    "dataset": PML.LearningDataset,
    "dataset_characteristic": PML.DatasetCharacteristicValue,
    "feature_set": PML.FeatureSetData,
    "data_reference": PL.DataReference,
    "domain_reference": PL.AttributeValue,
    "plain": PL.AttributeValue,
}

AGENT_CLASS = PML.Persona


def run_class(phase: str | None) -> str:
    """The class of a workflow run: a learning process for the learning phase."""
    return PML.LearningProcessExecution if phase == "learning" else PL.WorkflowExecution


def execution_class(kind: str, stage_kind: str | None) -> str:
    """The class of an execution of a transformation of ``kind`` (sections: by their stage)."""
    if kind == "section":
        return SECTION_EXECUTION_CLASS.get(stage_kind or "", DEFAULT_SECTION_EXECUTION_CLASS)
    return EXECUTION_CLASS[kind]
