"""Each query the physician pages compile once (healthbench_web/compiled_query.py) returns what
its queryset returns, rows and instances (select_related included) alike, on SQLite and
PostgreSQL; and a build that hides a sentinel, or a queryset of another kind, is refused."""

import uuid

import pytest
from django.db.models import Case, Count, Exists, Max, Min, OuterRef, Q, When
from django.utils import timezone

from annotation.models import Assignment, Draft, Guideline, GuidelineRead, Physician, PhysicianLabel
from annotation.selectors import tasks
from annotation.services import guidelines, text_drafts
from annotation.task_kinds import base as kind_base
from annotation.task_kinds import kind_of
from annotation.task_kinds import label as kind_label
from annotation.task_kinds import rubric as kind_rubric
from healthbench_web.auth_user import _user_with_physician
from healthbench_web.compiled_query import CompiledQuery, sentinels
from tests.workspace import make_world

pytestmark = pytest.mark.django_db


def _fields(obj) -> dict:
    return {f.attname: getattr(obj, f.attname) for f in obj._meta.concrete_fields}


def _same_instance(ours, theirs, related: list[str]) -> None:
    assert type(ours) is type(theirs)
    assert _fields(ours) == _fields(theirs)
    for name in related:
        assert _fields(getattr(ours, name)) == _fields(getattr(theirs, name))
        assert name in ours._state.fields_cache  # loaded with it, no second query


def test_task_lookups_are_the_querysets_instances(django_assert_num_queries):
    world = make_world()
    for task in (world.rubric_task, world.ideal_task, world.vote_task):
        theirs = Assignment.objects.select_related("conversation").get(id=task.id)
        with django_assert_num_queries(1):
            ours = kind_base._own_task.all(task.physician_id, task.kind, task.conversation.code)
        assert len(ours) == 1
        _same_instance(ours[0], theirs, ["conversation"])
    theirs = Assignment.objects.select_related("conversation", "response", "criterion").get(id=world.label_task.id)
    (ours,) = kind_label._own_item.all(world.label_task.code, world.colleague.id)
    _same_instance(ours, theirs, ["conversation", "response", "criterion"])
    assert kind_label._own_item.all(world.label_task.code, world.owner.id) == []  # someone else's
    assert kind_base._own_task.all(world.owner.id, Assignment.Kind.RUBRIC, uuid.uuid4()) == []


def test_the_user_comes_with_their_physician_profile_or_none(django_assert_num_queries):
    world = make_world()
    user = world.owner.user
    assert user is not None
    (ours,) = _user_with_physician.all(user.pk)
    _same_instance(ours, type(user).objects.get(pk=user.pk), [])
    assert _fields(ours.physician) == _fields(world.owner)
    admin = type(user).objects.create_user("staff_only", is_staff=True)
    (alone,) = _user_with_physician.all(admin.pk)
    with django_assert_num_queries(0), pytest.raises(Physician.DoesNotExist):
        alone.physician  # noqa: B018 - known absent, without a query


def _reference_position(task: Assignment) -> tuple:
    """label_position as it was written with `.aggregate()` (before the query was compiled once)."""
    is_open = Q(status=Assignment.Status.OPEN) & ~Q(id=task.id)
    found = tasks._label_items(task.physician_id, task.kind).aggregate(
        total=Count("id"),
        done=Count("id", filter=Q(status=Assignment.Status.DONE)),
        previous=Max("id", filter=Q(id__lt=task.id)),
        following=Min("id", filter=is_open & Q(id__gt=task.id)),
        first_open=Min("id", filter=is_open),
    )
    following = found["following"] or found["first_open"]
    codes = dict(Assignment.objects.values_list("id", "code"))
    return (
        found["done"],
        found["total"],
        str(codes[found["previous"]]) if found["previous"] else None,
        str(codes[following]) if following else None,
    )


def _reference_next(physician, kind: str, after) -> tasks.NextTask | None:
    """next_task as it was written with the ORM."""
    open_tasks = Assignment.objects.filter(physician=physician, status=Assignment.Status.OPEN)
    if after is not None:
        open_tasks = open_tasks.exclude(id=after.id)
    found = (
        open_tasks.order_by(Case(When(kind=kind, then=0), default=1), "id")
        .values_list("kind", "code", "conversation__code", "conversation__prompt_id")
        .first()
    )
    if found is None:
        return None
    found_kind, code, conversation_code, prompt_id = found
    task_kind = kind_of(found_kind)
    url = task_kind.url(code=code, conversation_code=conversation_code)
    return tasks.NextTask(url, found_kind, task_kind.label, prompt_id, found_kind != kind)


def test_label_position_next_task_and_rubric_authorship_are_the_orms():
    world = make_world()
    more = [
        Assignment.objects.create(
            physician=world.colleague, kind=Assignment.Kind.LABEL, conversation=world.a, response=r, criterion=c
        )
        for r, c in [(world.responses[0], world.imported), (world.responses[1], world.imported)]
    ]
    items = [world.label_task, world.next_label_task, *more]
    for step in range(3):
        for task in items:
            task.refresh_from_db()
            task.physician = world.colleague
            got = tasks.label_position(task)
            assert (got.done, got.total, got.previous_code, got.next_code) == _reference_position(task)
            for kind in Assignment.Kind.values:
                for after in (None, task):
                    assert tasks.next_task(world.colleague, kind=kind, after=after) == _reference_next(
                        world.colleague, kind, after
                    )
        # Label one more item each round: the counts and neighbours move.
        Assignment.objects.filter(id=items[step].id).update(status=Assignment.Status.DONE, completed=timezone.now())
        PhysicianLabel.objects.create(
            physician=world.colleague,
            response_id=int(items[step].response_id or 0),
            criterion_id=int(items[step].criterion_id or 0),
            met=True,
        )
    assert kind_rubric.writes(physician=world.owner, conversation=world.a)
    assert kind_rubric.writes(physician=world.colleague, conversation=world.b)
    assert not kind_rubric.writes(physician=world.colleague, conversation=world.a)
    assert not kind_rubric.writes(physician=world.outsider, conversation=world.a)


def test_summary_guideline_and_draft_are_the_orms():
    world = make_world()
    for who in (world.owner, world.colleague, world.outsider):
        assert tasks._summary_rows.all(who.id) == list(tasks._summary_query(who.id))
    Guideline.objects.create(kind="rubric", text="Write **clearly**.")
    for read in (False, True):
        if read:
            GuidelineRead.objects.create(physician=world.owner, kind="rubric")
        expected = (
            Guideline.objects.filter(kind="rubric")
            .annotate(read=Exists(GuidelineRead.objects.filter(physician=world.owner, kind=OuterRef("kind"))))
            .first()
        )
        found = guidelines._guideline.first(world.owner.id, "rubric")
        assert _fields(found) == _fields(expected)
        assert found.read is expected.read is read
    assert guidelines._guideline.first(world.owner.id, "label") is None
    assert text_drafts.draft_text(physician=world.owner, key="ideal:x") is None
    Draft.objects.create(physician=world.owner, key="ideal:x", text="Half a thought")
    assert text_drafts.draft_text(physician=world.owner, key="ideal:x") == "Half a thought"
    assert text_drafts.draft_text(physician=world.colleague, key="ideal:x") is None


def test_a_hidden_sentinel_or_another_kind_of_queryset_is_refused():
    make_world()
    hidden = CompiledQuery(lambda n: Assignment.objects.filter(id__gt=abs(n)).values_list("id"), *sentinels(1))
    with pytest.raises(ValueError, match="not among the SQL's parameters"):
        hidden.all(1)
    values = CompiledQuery(lambda n: Assignment.objects.filter(id=n).values("id"), *sentinels(1))
    with pytest.raises(TypeError, match="values_list"):
        values.all(1)
    with pytest.raises(TypeError, match="1 values expected"):
        CompiledQuery(lambda n: Assignment.objects.filter(id=n), *sentinels(1)).all(1, 2)
