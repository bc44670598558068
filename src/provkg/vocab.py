"""Every namespace and term IRI provkg writes or queries, spelled once.

Constants mirror the RDF local names (``PROVML.TrainingExecution``) and hold
plain IRI strings. ``tests/test_ontology.py`` checks that every term here is
declared in a file of ``ontology/`` (or in the W3C vocabulary it comes from).
"""

from __future__ import annotations

from typing import ClassVar

__all__ = [
    "Vocabulary", "RDF", "RDFS", "XSD", "OWL", "PROV", "MLS", "PROVONE", "SPROV",
    "PROVLAKE", "PROVML", "SEIS", "PROVKG", "GEO", "PREFIXES", "DEFAULT_BASE",
]

#: where instance IRIs live unless a deployment configures its own base
DEFAULT_BASE = "https://w3id.org/provkg/id/"


class Vocabulary:
    """A namespace whose annotated class attributes become full IRIs."""

    namespace: ClassVar[str] = ""
    prefix: ClassVar[str] = ""

    def __init_subclass__(cls, *, prefix: str, namespace: str, **kw: object) -> None:
        super().__init_subclass__(**kw)
        cls.prefix = prefix
        cls.namespace = namespace
        for name in cls.__dict__.get("__annotations__", {}):
            if name in ("namespace", "prefix"):
                continue
            setattr(cls, name, namespace + name.rstrip("_"))

    @classmethod
    def terms(cls) -> dict[str, str]:
        """Local name -> IRI for every term of this vocabulary."""
        return {
            n.rstrip("_"): getattr(cls, n)
            for n in cls.__dict__.get("__annotations__", {})
            if n not in ("namespace", "prefix")
        }

    @classmethod
    def term(cls, local_name: str) -> str:
        return cls.namespace + local_name


class RDF(Vocabulary, prefix="rdf", namespace="http://www.w3.org/1999/02/22-rdf-syntax-ns#"):
    type: str
    JSON: str


class RDFS(Vocabulary, prefix="rdfs", namespace="http://www.w3.org/2000/01/rdf-schema#"):
    label: str
    comment: str
    subClassOf: str
    seeAlso: str


class XSD(Vocabulary, prefix="xsd", namespace="http://www.w3.org/2001/XMLSchema#"):
    string: str
    integer: str
    double: str
    decimal: str
    boolean: str
    dateTime: str
    anyURI: str
    nonNegativeInteger: str


class OWL(Vocabulary, prefix="owl", namespace="http://www.w3.org/2002/07/owl#"):
    Class: str
    ObjectProperty: str
    DatatypeProperty: str
    Ontology: str


class GEO(Vocabulary, prefix="geo", namespace="http://www.opengis.net/ont/geosparql#"):
    hasGeometry: str
    asWKT: str
    wktLiteral: str
    Geometry: str
    Feature: str


class PROV(Vocabulary, prefix="prov", namespace="http://www.w3.org/ns/prov#"):
    Activity: str
    Entity: str
    Agent: str
    Plan: str
    used: str
    wasGeneratedBy: str
    wasInformedBy: str
    wasInfluencedBy: str
    wasAssociatedWith: str
    wasAttributedTo: str
    wasDerivedFrom: str
    startedAtTime: str
    endedAtTime: str
    generatedAtTime: str
    value: str
    atLocation: str
    actedOnBehalfOf: str
    atTime: str
    hadActivity: str
    entity: str


class MLS(Vocabulary, prefix="mls", namespace="http://www.w3.org/ns/mls#"):
    Run: str
    Model: str
    ModelEvaluation: str
    HyperParameter: str
    HyperParameterSetting: str
    Dataset: str
    EvaluationMeasure: str


class PROVONE(Vocabulary, prefix="provone",
              namespace="http://purl.dataone.org/provone/2015/01/15/ontology#"):
    Program: str
    Execution: str
    Workflow: str


class SPROV(Vocabulary, prefix="s-prov",
            namespace="https://raw.githubusercontent.com/KNMI/s-provenance/master/resources/s-prov.owl#"):
    WFExecution: str
    Component: str
    ComponentInstance: str
    ComponentParameters: str
    Invocation: str
    Data: str
    Change: str
    SystemProcess: str
    invocationIndex: str
    lastEventTime: str
    wasChangedWith: str
    qualifiedChange: str
    hasChanged: str
    workflowName: str
    workflowId: str
    message: str
    type: str


class PROVLAKE(Vocabulary, prefix="provlake", namespace="https://w3id.org/provkg/provlake#"):
    # prospective
    Workflow: str
    DataTransformation: str
    Attribute: str
    DataStore: str
    DataSchema: str
    # retrospective
    WorkflowExecution: str
    DataTransformationExecution: str
    AttributeValue: str
    DataReference: str
    # properties
    tag: str            # string tag on a prospective element ("Training", "Hyperparameter", ...)
    isPartOf: str       # transformation -> workflow, section -> stage, task -> workflow execution
    hasInput: str       # prospective: transformation -> attribute it uses
    hasOutput: str      # prospective: transformation -> attribute it generates
    concept: str        # prospective attribute -> the domain concept (e.g. seis:numberOfSlices) it holds
    storedIn: str       # attribute / data reference -> data store
    location: str       # data reference -> URI of the data (xsd:anyURI)
    denotes: str        # captured value -> the domain-KG resource it stands for


class PROVML(Vocabulary, prefix="provml", namespace="https://w3id.org/provkg/provml#"):
    # Table 2 of the PROV-ML paper, plus the names of Listings 1-2
    Study: str
    LearningExperiment: str
    LearningProcessExecution: str
    LearningTask: str
    LearningTaskValue: str
    BaseLearningStage: str
    BaseLearningStageExecution: str
    Persona: str
    LearningStage: str
    LearningStageExecution: str
    LearningStageSection: str
    LearningSectionExecution: str
    Training: str
    Validation: str
    Evaluation: str
    TrainingExecution: str
    ValidationExecution: str
    EvaluationExecution: str
    TrainingSectionExecution: str
    ValidationSectionExecution: str
    EvaluationSectionExecution: str
    LearningDatasetReference: str
    LearningDataset: str
    DatasetCharacteristic: str
    DatasetCharacteristicValue: str
    FeatureExtraction: str
    FeatureExtractionExecution: str
    FeatureSet: str
    FeatureSetData: str
    FeatureSetCharacteristic: str
    Software: str
    Algorithm: str
    Implementation: str
    ImplementationCharacteristic: str
    LearningHyperparameter: str
    LearningHyperparameterValue: str
    LearningHyperparameterSetting: str
    ModelSchema: str
    ModelSchemaValue: str
    ModelProspection: str
    Model: str
    ModelHyperparameter: str
    ModelHyperparameterValue: str
    DataStoreInstance: str
    EvaluationMeasure: str
    ModelEvaluation: str
    EvaluationSpecification: str
    EvaluationProcedure: str


class SEIS(Vocabulary, prefix="seis", namespace="https://w3id.org/provkg/seismic#"):
    Basin: str
    Field: str
    Well: str
    Survey: str
    SeismicData: str
    SegyFile: str
    basin: str            # field / survey / well -> basin
    field: str            # survey / well -> field
    survey: str           # SEG-Y file -> the survey that produced it
    fileName: str
    # quantities a captured attribute can hold (spec `concept:`) and the KG can state
    numberOfSlices: str
    inlineStart: str
    inlineEnd: str
    crosslineStart: str
    crosslineEnd: str
    sampleInterval: str
    coordinates: str
    sliceStart: str
    sliceEnd: str
    tileSize: str
    noiseThreshold: str


class PROVKG(Vocabulary, prefix="provkg", namespace="https://w3id.org/provkg/ns#"):
    # only what no vocabulary above has
    Adaptation: str             # prospective: a runtime change of hyperparameters
    AdaptationExecution: str
    LinkAssertion: str          # a domain link added after the fact (`provkg link`)
    LinkRetraction: str         # a domain link taken back (`provkg link --remove`)
    index: str                  # position of a section in its parent (epoch / batch number)
    dependsOn: str              # a section waited for another (sub-property of prov:wasInformedBy)
    innermost: str              # a section transformation with no sections of its own (batches)
    status: str                 # "finished" | "failed"
    message: str                # failure message
    tag: str                    # a run's tag, "key=value"
    host: str
    pid: str
    environment: str            # JSON of the capture environment (rdf:JSON)
    linkedValue: str
    linkedTo: str
    locationOf: str             # the value of a location URI -> a value with an id stored there
    assertedBy: str
    assertedAt: str
    # ingest (issue 4): task events waiting for their run's workflow event
    pendingRun: str
    pendingEvent: str
    pendingParent: str
    summaryState: str           # the facts a section summary was computed from (rdf:JSON)
    # the spec a prospective workflow was registered from, so every later session uses it
    specDocument: str
    registering: str            # a spec registration under way (rdf:JSON: schema and spec)
    # section summaries (spec `granularity: summary`)
    SectionSummary: str
    MeasureSummary: str
    hasSectionSummary: str      # parent -> its summary (one lookup from the epoch)
    hasMeasureSummary: str
    executionCount: str
    timedCount: str             # executions with both a begin and an end (what *Seconds cover)
    minSeconds: str
    avgSeconds: str
    maxSeconds: str
    firstIndex: str
    lastIndex: str
    latestExecution: str        # summary -> its latest ended execution that did not fail (p1)
    valueCount: str
    minValue: str
    avgValue: str
    maxValue: str


PREFIXES: dict[str, str] = {
    v.prefix: v.namespace
    for v in (RDF, RDFS, XSD, OWL, GEO, PROV, MLS, PROVONE, SPROV, PROVLAKE, PROVML, SEIS, PROVKG)
}
