"""The data model's rules hold in the database itself, not only in forms."""

import pytest
from django.contrib.auth.models import User
from django.db import IntegrityError, transaction

from annotation.models import ConsensusCriterion, ConsensusVote, Conversation, Criterion, Physician, PhysicianLabel
from grading.models import Grade, Response, Run

pytestmark = pytest.mark.django_db

MESSAGES = [{"content": "Hello?", "role": "user"}]


@pytest.fixture
def conversation():
    return Conversation.objects.create(prompt_id="p-1", messages=MESSAGES)


@pytest.fixture
def physician():
    return Physician.objects.create(user=User.objects.create_user("doc"))


def _fails(**kwargs):
    with pytest.raises(IntegrityError), transaction.atomic():
        kwargs.pop("model").objects.create(**kwargs)


@pytest.mark.parametrize("points", [0, 11, -11])
def test_criterion_points_outside_the_rule_are_refused(conversation, points):
    _fails(model=Criterion, conversation=conversation, text="x", points=points)


def test_prompt_id_is_unique(conversation):
    _fails(model=Conversation, prompt_id="p-1", messages=MESSAGES)


def test_one_vote_per_physician_per_item(conversation, physician):
    entry = ConsensusCriterion.objects.create(cluster="cluster:a", text="t", axis="accuracy")
    ConsensusVote.objects.create(
        physician=physician, conversation=conversation, consensus_criterion=entry, applies=True
    )
    _fails(
        model=ConsensusVote, physician=physician, conversation=conversation, consensus_criterion=entry, applies=False
    )


def test_one_label_per_physician_per_response_and_criterion(conversation, physician):
    criterion = Criterion.objects.create(conversation=conversation, text="x", points=3)
    response = Response.objects.create(conversation=conversation, text="Hi")
    PhysicianLabel.objects.create(physician=physician, response=response, criterion=criterion, met=True)
    _fails(model=PhysicianLabel, physician=physician, response=response, criterion=criterion, met=False)


def test_a_consensus_criterion_is_attached_once_per_conversation(conversation):
    entry = ConsensusCriterion.objects.create(cluster="cluster:a", text="t", axis="accuracy")
    Criterion.objects.create(conversation=conversation, text="t", points=5, consensus_criterion=entry, level="cluster")
    _fails(model=Criterion, conversation=conversation, text="t", points=5, consensus_criterion=entry, level="cluster")


def test_a_physician_needs_a_login_or_an_anonymized_id():
    _fails(model=Physician)


def test_a_failed_grade_has_no_met_value(conversation):
    run = Run.objects.create(plan=Run.Plan.STORED, name="r")
    response = Response.objects.create(conversation=conversation, text="Hi")
    _fails(model=Grade, run=run, response=response, criterion_text="x", points=3, status="failed", met=False)


def test_one_grade_per_run_response_and_criterion(conversation):
    criterion = Criterion.objects.create(conversation=conversation, text="x", points=3)
    run = Run.objects.create(plan=Run.Plan.STORED, name="r")
    response = Response.objects.create(conversation=conversation, text="Hi")
    Grade.objects.create(run=run, response=response, criterion=criterion, criterion_text="x", points=3, met=True)
    _fails(
        model=Grade,
        run=run,
        response=response,
        criterion=criterion,
        criterion_text="x",
        points=3,
        met=False,
        position=1,
    )
