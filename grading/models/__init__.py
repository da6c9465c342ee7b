"""The grading app's models, re-exported here as Django expects of an app's models module:
endpoints.py (how graders and policies are called), runs.py (responses, runs and grades, which
build on the endpoints' snapshots) and records.py (provider batches and stored numbers, which
build on runs) and calibration.py (a run's calibration sample).
"""

from grading.models.calibration import CalibrationItem, CalibrationSample
from grading.models.endpoints import (
    ApiStyle,
    Endpoint,
    ExplanationLength,
    GraderConfig,
    GraderTemplate,
    GradingMode,
    Provider,
    ReasoningEffort,
)
from grading.models.records import ProviderBatch, RunRubric, StoredReport
from grading.models.runs import (
    DEFAULT_LENGTH_CENTRE,
    DEFAULT_LENGTH_PENALTY,
    Grade,
    Response,
    Run,
    RunBatch,
    SampleFailure,
)

__all__ = [
    "DEFAULT_LENGTH_CENTRE",
    "DEFAULT_LENGTH_PENALTY",
    "ApiStyle",
    "CalibrationItem",
    "CalibrationSample",
    "Endpoint",
    "ExplanationLength",
    "Grade",
    "GraderConfig",
    "GraderTemplate",
    "GradingMode",
    "Provider",
    "ProviderBatch",
    "ReasoningEffort",
    "Response",
    "Run",
    "RunBatch",
    "RunRubric",
    "SampleFailure",
    "StoredReport",
]
