"""Shared set-up for the physician-workspace tests: a small programme with every kind of person.

`owner` writes the rubric and ideal response of `a` and votes on it; `colleague` votes on `a`,
labels two of its items and writes the rubric of `b`; `outsider`
holds none; plus a curator, a researcher, a physician on trial, an applicant and a removed one.
"""

import re
from dataclasses import dataclass

from django.contrib.auth.models import User
from django.test import Client

from annotation.models import (
    Assignment,
    ConsensusCriterion,
    Conversation,
    Criterion,
    IdealResponse,
    Physician,
)
from grading.models import Response

PASSWORD = "pw-for-tests"
THEME = "emergency_referrals"
MESSAGES = [
    {"content": "My father has crushing chest pain and is sweating. What should I do?", "role": "user"},
    {"content": "How old is he, and how long has it lasted?", "role": "assistant"},
    {"content": "He is 67 and it started 20 minutes ago.", "role": "user"},
]


def physician(username: str, *, role=Physician.Role.PHYSICIAN, status=Physician.Status.ACTIVE, **fields) -> Physician:
    user = User.objects.create_user(username, password=PASSWORD)
    return Physician.objects.create(user=user, role=role, status=status, **fields)


def conversation(prompt_id: str, theme: str = THEME, **fields) -> Conversation:
    return Conversation.objects.create(
        prompt_id=prompt_id, messages=MESSAGES, example_tags=[f"theme:{theme}"], theme=theme, **fields
    )


def consensus(cluster: str, theme: str = THEME, text: str | None = None) -> ConsensusCriterion:
    return ConsensusCriterion.objects.create(
        cluster=f"cluster:{cluster}", text=text or f"Consensus criterion {cluster}.", axis="completeness", theme=theme
    )


def attach(conv: Conversation, entry: ConsensusCriterion, *, position: int = 50, origin=None) -> Criterion:
    return Criterion.objects.create(
        conversation=conv,
        position=position,
        text=entry.text,
        points=entry.points,
        tags=entry.tags(),
        level=Criterion.Level.CLUSTER,
        axis=entry.axis,
        consensus_criterion=entry,
        origin=origin,
    )


def task(who: Physician, kind: str, conv: Conversation, **fields) -> Assignment:
    return Assignment.objects.create(physician=who, kind=kind, conversation=conv, **fields)


@dataclass
class World:
    owner: Physician
    colleague: Physician
    outsider: Physician
    trial: Physician
    applicant: Physician
    removed: Physician
    curator: Physician
    researcher: Physician
    a: Conversation
    b: Conversation
    catalogue: list[ConsensusCriterion]
    other_theme: ConsensusCriterion
    imported: Criterion
    cluster: Criterion
    responses: list[Response]
    rubric_task: Assignment
    ideal_task: Assignment
    vote_task: Assignment
    label_task: Assignment
    colleague_rubric_task: Assignment
    colleague_vote_task: Assignment
    next_label_task: Assignment


def make_world() -> World:
    owner = physician("dr_owner", specialty="Emergency medicine", languages=["en", "sw"])
    colleague = physician("dr_colleague", specialty="Family medicine", languages=["en", "pt"])
    outsider = physician("dr_outsider", specialty="Family medicine", languages=["fr"])
    trial = physician("dr_trial", status=Physician.Status.TRIAL, specialty="Pediatrics", languages=["en"])
    applicant = physician("dr_applicant", status=Physician.Status.APPLICANT)
    removed = physician("dr_removed", status=Physician.Status.REMOVED)
    curator = physician("curator", role=Physician.Role.CURATOR)
    researcher = physician("researcher", role=Physician.Role.RESEARCHER)
    a, b = conversation("conv-a"), conversation("conv-b", theme="hedging")
    catalogue = [
        consensus(f"{THEME}_{n}", text=t)
        for n, t in enumerate(["Advises emergency care.", "Gives CPR steps.", "Asks about symptoms."])
    ]
    other_theme = consensus("hedging_0", theme="hedging")
    imported = Criterion.objects.create(
        conversation=a,
        position=0,
        text="Tells the user to call emergency services now.",
        points=9,
        tags=["level:example", "axis:completeness"],
        axis="completeness",
    )
    cluster = attach(a, catalogue[0], position=1)
    responses = [
        Response.objects.create(
            conversation=a, text=f"Response {n}: call an ambulance.", model_name="m", sample_index=n
        )
        for n in range(2)
    ]
    ideal_task = task(owner, Assignment.Kind.IDEAL_RESPONSE, a, condition=IdealResponse.Condition.WITH_REFERENCE)
    ideal_task.reference_responses.set(responses)
    return World(
        owner=owner,
        colleague=colleague,
        outsider=outsider,
        trial=trial,
        applicant=applicant,
        removed=removed,
        curator=curator,
        researcher=researcher,
        a=a,
        b=b,
        catalogue=catalogue,
        other_theme=other_theme,
        imported=imported,
        cluster=cluster,
        responses=responses,
        rubric_task=task(owner, Assignment.Kind.RUBRIC, a),
        ideal_task=ideal_task,
        vote_task=task(owner, Assignment.Kind.CONSENSUS_VOTE, a),
        label_task=task(colleague, Assignment.Kind.LABEL, a, response=responses[0], criterion=cluster),
        colleague_rubric_task=task(colleague, Assignment.Kind.RUBRIC, b),
        colleague_vote_task=task(colleague, Assignment.Kind.CONSENSUS_VOTE, a),
        next_label_task=task(colleague, Assignment.Kind.LABEL, a, response=responses[1], criterion=cluster),
    )


def client_for(who: Physician | None, *, csrf: bool = False) -> Client:
    client = Client(enforce_csrf_checks=csrf)
    if who is not None:
        assert who.user is not None, who
        client.force_login(who.user)
    return client


def htmx(**headers) -> dict:
    return {"HTTP_HX_REQUEST": "true", **headers}


CSRF_INPUT = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')


def csrf_token_from(html: str) -> str:
    match = CSRF_INPUT.search(html)
    assert match, "the page has no CSRF token"
    return match.group(1)
