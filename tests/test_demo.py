"""The demo: load_demo, the demo accounts, and what a first visit shows."""

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from annotation.models import (
    THEMES,
    Axis,
    ConsensusVote,
    Conversation,
    Criterion,
    IdealResponse,
    Physician,
    PhysicianLabel,
    Subset,
)
from grading.management.commands.load_demo import ACCOUNTS, DATASET, DEFAULT_PASSWORD, RESPONSES
from grading.models import Grade, Response, Run

MODELS = [Conversation, Criterion, IdealResponse, Physician, ConsensusVote, PhysicianLabel, Response, Run, Grade]


def _load_demo(**options) -> str:
    # Tests run with DEBUG off, where the command wants the password spelled out.
    options.setdefault("password", DEFAULT_PASSWORD)
    out = StringIO()
    call_command("load_demo", stdout=out, **options)
    return out.getvalue()


def _counts() -> dict[str, int]:
    return {model.__name__: model._default_manager.count() for model in MODELS}


def _dataset_rows() -> list[dict]:
    return [json.loads(line) for line in DATASET.read_text().splitlines()]


@pytest.fixture
def demo(db):
    _load_demo()


def test_load_demo_is_idempotent(db):
    _load_demo()
    first = _counts()
    _load_demo()
    assert _counts() == first
    assert first["Conversation"] == len(_dataset_rows())
    assert first["Response"] == 2 * first["Conversation"]


def test_load_demo_puts_every_conversation_in_all_and_demo(demo):
    n = Conversation.objects.count()
    assert Subset.objects.get(name="all").conversations.count() == n
    assert Subset.objects.get(name="demo").conversations.count() == n


def test_load_demo_uses_the_published_password_when_debug_is_on(db, settings):
    settings.DEBUG = True
    out = StringIO()
    call_command("load_demo", stdout=out)
    assert f"password: {DEFAULT_PASSWORD}" in out.getvalue()


def test_load_demo_prints_the_accounts_and_their_password(db):
    out = _load_demo(password="s3cret-demo")
    assert "s3cret-demo" in out
    for account in ACCOUNTS:
        assert account.username in out


def test_load_demo_refuses_the_published_password_when_debug_is_off(db, settings):
    settings.DEBUG = False
    with pytest.raises(CommandError, match="pass --password"):
        call_command("load_demo", stdout=StringIO())
    assert not Conversation.objects.exists()


def test_demo_run_has_one_grade_per_response_and_criterion(demo):
    run = Run.objects.get(name="demo-run")
    assert run.status == Run.Status.DONE
    expected = sum(r.conversation.criteria.count() for r in Response.objects.select_related("conversation"))
    assert run.grades.count() == expected
    grade = run.grades.select_related("criterion").first()
    assert (grade.criterion_text, grade.points, grade.tags) == (
        grade.criterion.text,
        grade.criterion.points,
        grade.criterion.tags,
    )
    assert run.grades.filter(met=True).exists()
    assert run.grades.filter(met=False).exists()


def test_demo_labels_are_on_consensus_criteria_only(demo):
    assert PhysicianLabel.objects.exists()
    assert not PhysicianLabel.objects.filter(criterion__consensus_criterion__isnull=True).exists()
    assert ConsensusVote.objects.filter(applies=True).exists()


def _log_in(client, username: str) -> None:
    # Through the login form: failed-login limits need the request that Client.login() leaves out.
    response = client.post("/login/", {"username": username, "password": DEFAULT_PASSWORD})
    assert response.status_code == 302, response.content


@pytest.mark.parametrize("account", ACCOUNTS, ids=lambda a: a.username)
def test_demo_accounts_can_log_in(demo, client, account):
    _log_in(client, account.username)
    response = client.get("/")
    assert response.status_code == 200
    assert f"Welcome, {account.username}" in response.text
    physician = Physician.objects.get(user__username=account.username)
    assert physician.role == account.role
    assert physician.specialty
    assert physician.country
    assert physician.languages


def test_root_shows_a_login_page_to_visitors(demo, client):
    response = client.get("/")
    assert response.status_code == 200
    assert 'name="password"' in response.text


def test_curator_sees_the_demo_conversations_in_the_admin(demo, client):
    _log_in(client, "curator")
    response = client.get(reverse("admin:annotation_conversation_changelist"))
    assert response.status_code == 200
    for row in _dataset_rows():
        assert row["prompt_id"] in response.text


def test_researcher_cannot_open_the_admin(demo, client):
    _log_in(client, "researcher")
    response = client.get(reverse("admin:annotation_conversation_changelist"))
    assert response.status_code == 302


def test_demo_dataset_is_written_in_the_public_row_format():
    lines = DATASET.read_text().splitlines()
    themes = set()
    for line in lines:
        row = json.loads(line)
        assert json.dumps(row) == line
        assert list(row) == ["example_tags", "ideal_completions_data", "prompt", "prompt_id", "rubrics", "canary"]
        assert row["canary"] == "demo:healthbench-studio"
        assert row["prompt"][-1]["role"] == "user"
        assert 6 <= len(row["rubrics"]) <= 12
        assert any(item["points"] < 0 for item in row["rubrics"])
        clusters = [item for item in row["rubrics"] if item["tags"][0] == "level:cluster"]
        has_category = any(tag.startswith("physician_agreed_category:") for tag in row["example_tags"])
        assert bool(clusters) == has_category
        for item in row["rubrics"]:
            assert item["points"] != 0
            assert -10 <= item["points"] <= 10
            assert item["tags"][-1].removeprefix("axis:") in Axis.values
        themes.add(row["example_tags"][0].removeprefix("theme:"))
    assert themes == set(THEMES)


def test_demo_responses_name_real_rubric_positions():
    rubric_sizes = {row["prompt_id"]: len(row["rubrics"]) for row in _dataset_rows()}
    for line in RESPONSES.read_text().splitlines():
        row = json.loads(line)
        assert all(0 <= p < rubric_sizes[row["prompt_id"]] for p in row["criteria_met"])


def test_each_demo_physician_has_open_tasks_of_every_kind_and_none_unblinds_another(demo):
    from annotation.models import Assignment, Physician
    from annotation.selectors.tasks import task_summary

    for username in ("physician", "physician2"):
        physician = Physician.objects.get(user__username=username)
        kinds = {k.kind: k.open for k in task_summary(physician)}
        assert all(kinds[kind] >= 1 for kind in Assignment.Kind.values), (username, kinds)
        tasks = Assignment.objects.filter(physician=physician, status=Assignment.Status.OPEN)
        labeled = set(tasks.filter(kind="label").values_list("conversation_id", flat=True))
        blinded = set(tasks.filter(kind__in=["rubric", "consensus_vote"]).values_list("conversation_id", flat=True))
        assert labeled
        assert not labeled & blinded
        # The open items are really open: no vote or label of theirs is there yet.
        assert not physician.labels.filter(response__conversation_id__in=labeled).exists()
