"""The annotation app's models: the dataset (conversations, rubrics, consensus, labels,
subsets) in dataset.py and the physician workspace (assignments, the rubric audit) in
workspace.py, which builds on the dataset; the store of rendered Markdown in rendered.py.
All are re-exported here, as Django expects of an app's models module.
"""

from annotation.models.dataset import (
    THEMES,
    Axis,
    ConsensusCriterion,
    ConsensusVote,
    Conversation,
    Criterion,
    IdealResponse,
    Physician,
    PhysicianLabel,
    Subset,
    SubsetChange,
    SubsetMember,
    SubsetVersion,
)
from annotation.models.rendered import RenderedMarkdown
from annotation.models.workspace import (
    Assignment,
    CantJudge,
    CriterionEdit,
    Draft,
    GoldAnswer,
    GoldItem,
    Guideline,
    GuidelineRead,
    PhysicianQualityStore,
    TaskEvent,
)

__all__ = [
    "THEMES",
    "Assignment",
    "Axis",
    "CantJudge",
    "ConsensusCriterion",
    "ConsensusVote",
    "Conversation",
    "Criterion",
    "CriterionEdit",
    "Draft",
    "GoldAnswer",
    "GoldItem",
    "Guideline",
    "GuidelineRead",
    "IdealResponse",
    "Physician",
    "PhysicianLabel",
    "PhysicianQualityStore",
    "RenderedMarkdown",
    "Subset",
    "SubsetChange",
    "SubsetMember",
    "SubsetVersion",
    "TaskEvent",
]
