"""The task kinds' one table (annotation.task_kinds): it names the kinds the database accepts,
every kind module fills in the interface, a kind registered there alone is given out under its
own rule and listed with its page, and the code outside the kinds' modules names no kind but
through the short list below."""

import ast
import pkgutil
import re
from collections.abc import Sequence
from importlib import import_module
from pathlib import Path

import pytest
from django.urls import resolve, reverse

import annotation.task_kinds
from annotation.models import Assignment, Conversation
from annotation.selectors.tasks import next_task, task_summary
from annotation.services.assignments import assignments_create, assignments_plan
from annotation.task_kinds import FIRST_OFFERED, KINDS, kind_of
from annotation.task_kinds.base import Excluded, TaskKind
from tests.conftest import REPO
from tests.test_architecture import GRAPH, MODULES
from tests.workspace import client_for, conversation, physician

KIND_MODULES = sorted(
    f"annotation.task_kinds.{info.name}"
    for info in pkgutil.iter_modules(annotation.task_kinds.__path__)
    if info.name != "base"
)
# Where a kind is named by its value: the model's choices and constraints, and the migrations.
OWN = ("annotation/task_kinds/", "annotation/models/", "/migrations/")
# The modules that import one kind's module by name, each with why it must: a kind's page (its
# view) and the services that record its answers are that kind's by nature; a new kind adds its
# own and changes none of these.
NAMED_KINDS = {
    # Each page asks its own kind for the physician's task (the access rule).
    "annotation.views.rubric": {"rubric"},
    "annotation.views.ideal": {"ideal_response"},
    "annotation.views.votes": {"consensus_vote"},
    "annotation.views.labels": {"label"},
    # The rubric editor's criterion lookup: a criterion belongs to the rubric being written.
    "annotation.access": {"rubric"},
    # A drafted conversation enters the rubric workflow: someone is given its rubric to write.
    "annotation.services.drafts": {"rubric"},
    # A ballot complete marks its voting task done.
    "annotation.services.consensus": {"consensus_vote"},
    # The calibration sample gives out labeling tasks, under the labeling kind's rule, and
    # `calibrate status` counts them.
    "grading.calibration.sample": {"label"},
    "grading.management.commands.calibrate": {"label"},
    # The demo builds a programme with open votes and labels to keep blind.
    "grading.management.commands.load_demo": {"consensus_vote", "label"},
    # The physician page's median seconds per labeling item.
    "grading.physicians.selectors": {"label"},
}
# Places that compare a value spelt like a kind's without it being a task's kind.
NAMED_ALIKE = {
    # The gold item form's own choice between GoldItem's two shapes (a labeling item, a voting
    # item: its constraints in annotation/models/workspace.py), not an assignment's kind.
    "annotation.forms.gold": ["kind == 'label'"],
}
# Templates that still ask which kind a task is (their words are the kind's): the home page's
# "Start labeling" button leads to the next item rather than a listed one, and the assignment
# page says the blinding rule of the kind the curator chose.
TEMPLATES_NAMING_KINDS = {"home.html", "annotation/assignments.html"}

pytestmark = pytest.mark.django_db


def test_the_table_names_the_kinds_the_database_accepts():
    assert list(KINDS) == list(Assignment.Kind.values)
    assert all(kind.value == value and kind_of(value) is kind for value, kind in KINDS.items())
    assert [kind.label for kind in KINDS.values()] == list(Assignment.Kind.labels)
    longest = max(len(value) for value in KINDS)
    assert longest <= (Assignment._meta.get_field("kind").max_length or 0)
    assert FIRST_OFFERED in KINDS
    with pytest.raises(KeyError):
        kind_of("second_opinion")


@pytest.mark.parametrize("name", KIND_MODULES)
def test_every_kind_module_fills_in_the_interface(name):
    module = import_module(name)
    kind = module.KIND
    assert isinstance(kind, TaskKind)
    assert KINDS[kind.value] is kind, f"{name} is not in the table"
    assert (module.__doc__ or "").strip(), f"{name} says what its kind is"
    # Its page: reached by the task's code or the conversation's, as the kind says.
    code, conversation_code = "00000000-0000-0000-0000-000000000001", "00000000-0000-0000-0000-000000000002"
    url = kind.url(code=code, conversation_code=conversation_code)
    assert resolve(url).url_name == kind.page
    assert (code if kind.by_task_code else conversation_code) in url


def test_every_kind_is_in_a_module_of_its_own_and_the_draft_fields_are_one_kinds_each():
    assert sorted(type(kind).__module__ for kind in KINDS.values()) == KIND_MODULES
    fields = [field for kind in KINDS.values() for field in kind.drafts]
    assert len(fields) == len(set(fields))


class SecondOpinion(TaskKind):
    """A kind of a test: a second reading of a conversation, done on the votes page, never by
    the conversation's author."""

    value = "second_opinion"
    page = "votes"

    @property
    def label(self) -> str:
        return "Give a second opinion"

    def excluded(self, conversation_ids: Sequence[int]) -> Excluded:
        found: Excluded = {}
        for cid in conversation_ids:
            author_id = Conversation.objects.get(id=cid).author_id
            if author_id is not None:
                found.setdefault(cid, {})[author_id] = "wrote it"
        return found


def test_a_kind_in_the_table_alone_is_given_out_under_its_rule_and_listed_with_its_page(monkeypatch):
    kind = SecondOpinion()
    monkeypatch.setitem(KINDS, kind.value, kind)
    author, reader = physician("author"), physician("reader")
    conv = conversation("p-1", author=author)
    plan = assignments_plan(kind=kind.value, conversation_ids=[conv.id], physicians=[author, reader], per_item=2)
    assert plan.pairs == [((conv.id, None, None), reader.id)]
    (reason,) = plan.reasons
    assert "skipped author, who wrote it" in reason
    summary = assignments_create(
        kind=kind.value, conversation_ids=[conv.id], physicians=[author, reader], per_item=2, assigned_by=None
    )
    assert (summary.created, summary.short, summary.withdrawn) == (1, 1, 0)
    url = reverse("votes", args=[conv.code])
    (listed,) = [entry for entry in task_summary(reader) if entry.kind == kind.value]
    assert (listed.label, listed.open, [task.url for task in listed.tasks]) == ("Give a second opinion", 1, [url])
    found = next_task(reader, kind=kind.value)
    assert found is not None
    assert (found.url, found.label, found.other_kind) == (url, "Give a second opinion", False)
    page = client_for(reader).get("/").text
    assert 'id="tasks-second_opinion"' in page
    assert "Give a second opinion" in page


def _kind_named(node: ast.AST, values: set[str], members: set[str]) -> bool:
    """Whether `node` names one kind: `Assignment.Kind.LABEL` (or any alias's `.LABEL`), or a
    kind's value compared with or passed as a kind (`kind == "label"`, `Q(kind="label")`)."""
    if isinstance(node, ast.Attribute) and node.attr in members:
        return True
    if isinstance(node, ast.Compare):
        operands = [node.left, *node.comparators]
        said = [o for o in operands if isinstance(o, ast.Constant) and o.value in values]
        return bool(said) and any("kind" in ast.unparse(o).lower() for o in operands if o not in said)
    if isinstance(node, ast.keyword) and (node.arg or "").split("__")[-1] == "kind":
        return isinstance(node.value, ast.Constant) and node.value.value in values
    return False


def kind_names(path: Path) -> list[str]:
    """Each place in the module that names a specific kind, as `line: source`."""
    values, members = set(Assignment.Kind.values), set(Assignment.Kind.names)
    tree = ast.parse(path.read_text())
    return [
        f"{getattr(node, 'lineno', '?')}: {ast.unparse(node)}"
        for node in ast.walk(tree)
        if _kind_named(node, values, members)
    ]


def test_the_checker_finds_a_kind_named_each_way(tmp_path):
    source = tmp_path / "m.py"
    source.write_text(
        "a = Assignment.Kind.LABEL\nb = KINDS.RUBRIC\nc = task.kind == 'label'\n"
        "d = Q(assignments__kind='rubric')\ne = kind in ('x',)\nf = {'label': 1}\n"
    )
    assert [line.split(":")[0] for line in kind_names(source)] == ["1", "2", "3", "4"]


def test_no_module_outside_the_kinds_names_a_kind():
    named = {
        name: found
        for name, path in MODULES.items()
        if not any(part in str(path.relative_to(REPO)) for part in OWN) and (found := kind_names(path))
    }
    assert {name: [place.partition(": ")[2] for place in found] for name, found in named.items()} == NAMED_ALIKE


def test_only_the_listed_modules_import_a_kind_by_name():
    imported: dict[str, set[str]] = {}
    for name, path in MODULES.items():
        if name.startswith("annotation.task_kinds"):  # the registry and the kinds themselves
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                found = {node.module} | {f"{node.module}.{alias.name}" for alias in node.names}
                if kinds := {m.rpartition(".")[2] for m in found if m in KIND_MODULES}:
                    imported.setdefault(name, set()).update(kinds)
    assert imported == NAMED_KINDS


def test_only_the_listed_templates_ask_which_kind_a_task_is():
    said = re.compile(r"kind\S*\s*==\s*\"(" + "|".join(Assignment.Kind.values) + ')"')
    found = {
        str(path.relative_to(root))
        for root in REPO.glob("*/templates")
        for path in root.rglob("*.html")
        if said.search(path.read_text())
    }
    assert found == TEMPLATES_NAMING_KINDS


def test_the_kinds_import_only_the_models_and_the_seam():
    # Selectors, services, access and views ask the kinds: a kind that imported them would circle.
    for name in MODULES:
        if name.startswith("annotation.task_kinds"):
            allowed = ("annotation.models", "annotation.grading_seam", "annotation.task_kinds")
            assert all(target.startswith(allowed) for target in GRAPH[name]), (name, GRAPH[name])
