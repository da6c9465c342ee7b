"""Load the demo: our own small dataset, demo accounts, model responses and a finished run.

Everything here is written by the project for demonstration (annotation/demo/); none of it is
public HealthBench data. Running the command again converges on the same state.
"""

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from annotation.formats.importer import ImportFailed, ImportSummary, import_healthbench_lines
from annotation.models import ConsensusVote, Conversation, Criterion, Physician, PhysicianLabel, Subset
from annotation.services.assignments import assignments_create
from annotation.task_kinds.consensus_vote import KIND as CONSENSUS_VOTE
from annotation.task_kinds.label import KIND as LABEL
from grading.models import Response, Run
from grading.pipeline.run_launch import run_record
from grading.plans import PlanItem

# The demo data sits with the people who write it (annotation/demo/); the command loads runs and
# grades too, so it lives in grading, which may import annotation.
DEMO_DIR = Path(__file__).resolve().parents[3] / "annotation" / "demo"
DATASET = DEMO_DIR / "demo_dataset.jsonl"
RESPONSES = DEMO_DIR / "demo_responses.jsonl"
DEMO_SUBSET = "demo"
DEMO_MODEL = "demo-model-a"
DEMO_RUN = "demo-run"
# Published in the README: fine on a laptop, refused when DEBUG is off (see the command).
DEFAULT_PASSWORD = "healthbench-demo"  # noqa: S105 - public on purpose, refused without DEBUG
# Open tasks of every kind for each demo physician, by line of the demo file. Chosen so that no
# task unblinds another: nobody labels a conversation they vote on or write the rubric of, votes
# go to themes the catalogue covers, and labels to conversations with consensus criteria. The
# demo's own votes and labels leave these (physician, conversation) pairs out, so the tasks are open.
DEMO_TASKS: dict[str, dict[str, tuple[int, ...]]] = {
    "physician": {"rubric": (8,), "ideal_response": (9,), "consensus_vote": (4, 5), "label": (3, 6)},
    "physician2": {"rubric": (9,), "ideal_response": (8,), "consensus_vote": (3, 7), "label": (2, 4)},
}


@dataclass(frozen=True)
class DemoAccount:
    username: str
    role: str
    superuser: bool
    specialty: str
    country: str
    languages: tuple[str, ...]
    career_stage: str


_ROLE = Physician.Role
_STAGE = Physician.CareerStage
ACCOUNTS = [
    DemoAccount("physician", _ROLE.PHYSICIAN, False, "Emergency medicine", "Kenya", ("en", "sw"), _STAGE.MID),
    DemoAccount("physician2", _ROLE.PHYSICIAN, False, "Family medicine", "Brazil", ("pt", "en", "es"), _STAGE.EARLY),
    # A superuser so that the admin lists every model, including users and groups.
    DemoAccount("curator", _ROLE.CURATOR, True, "Internal medicine", "United Kingdom", ("en",), _STAGE.SENIOR),
    DemoAccount("researcher", _ROLE.RESEARCHER, False, "Public health", "United States", ("en", "fr"), _STAGE.EARLY),
]


@dataclass(frozen=True)
class DemoResponse:
    response: Response
    # Positions in the conversation's rubric that this response really meets, as its
    # author judged them: the ground truth the demo grader and physicians start from.
    criteria_met: frozenset[int]


@dataclass(frozen=True)
class DemoSummary:
    accounts: list[Physician]
    password: str
    dataset: ImportSummary
    responses: int
    run: Run
    grades: int
    votes: int
    labels: int
    tasks: int = 0


def _flip(salt: str, *parts: object, one_in: int) -> bool:
    """A stable pseudo-random choice, so that every load gives the same demo data."""
    digest = hashlib.sha256(":".join([salt, *map(str, parts)]).encode()).digest()
    return digest[0] % one_in == 0


def demo_accounts_create(*, password: str) -> list[Physician]:
    User = get_user_model()
    physicians = []
    for account in ACCOUNTS:
        user, _ = User.objects.get_or_create(username=account.username)
        user.email = f"{account.username}@demo.invalid"
        user.is_staff = account.superuser
        user.is_superuser = account.superuser
        user.is_active = True
        user.set_password(password)
        user.save()
        physician, _ = Physician.objects.update_or_create(
            user=user,
            defaults={
                "role": account.role,
                "status": Physician.Status.ACTIVE,
                "specialty": account.specialty,
                "country": account.country,
                "languages": list(account.languages),
                "career_stage": account.career_stage,
            },
        )
        physicians.append(physician)
    return physicians


def demo_dataset_import() -> ImportSummary:
    with DATASET.open("rb") as lines:
        return import_healthbench_lines(lines, subset_name=DEMO_SUBSET)


def demo_responses_create() -> list[DemoResponse]:
    rows = [json.loads(line) for line in RESPONSES.read_text().splitlines() if line.strip()]
    conversations = Conversation.objects.in_bulk([row["prompt_id"] for row in rows], field_name="prompt_id")
    created = []
    for row in rows:
        response, _ = Response.objects.update_or_create(
            conversation=conversations[row["prompt_id"]],
            source=Response.Source.SAMPLED,
            model_name=DEMO_MODEL,
            sample_index=row["sample_index"],
            defaults={
                "text": row["text"],
                "parameters": {"temperature": 0.7},
                "completion_id": f"demo:{row['prompt_id']}:{row['sample_index']}",
            },
        )
        created.append(DemoResponse(response, frozenset(row["criteria_met"])))
    return created


def _rubric(conversation_id: int) -> list[Criterion]:
    return list(Criterion.objects.filter(conversation_id=conversation_id).order_by("position", "id"))


def _demo_verdict(criteria_met: dict[int, frozenset[int]]):
    def verdict(response: Response, position: int, item: PlanItem) -> tuple[bool, str, str]:
        met = position in criteria_met[response.id]
        # The demo grader gets about one item in nine wrong, so the agreement report has
        # disagreements to show.
        if _flip("grader", response.conversation_id, response.sample_index, position, one_in=9):
            met = not met
        explanation = (
            "The response does what this criterion describes."
            if met
            else "The response does not do what this criterion describes."
        )
        return (
            met,
            f"Demo grade, no model was called. {explanation}",
            json.dumps({"explanation": explanation, "criteria_met": met}),
        )

    return verdict


def demo_run_create(*, responses: list[DemoResponse]) -> tuple[Run, int]:
    """The demo run, recorded through the run services on a frozen version of the demo subset,
    as a launched run is planned (rebuilt whole each time: the demo rubric or responses may
    have changed since the last load)."""
    return run_record(
        name=DEMO_RUN,
        subset=Subset.objects.get(name=DEMO_SUBSET),
        responses=[item.response for item in responses],
        verdict=_demo_verdict({item.response.id: item.criteria_met for item in responses}),
        policy_model=DEMO_MODEL,
        samples=2,
    )


def _task_conversations(kind: str) -> set[tuple[str, int]]:
    """(username, conversation id) of the demo's open tasks of `kind`."""
    prompt_ids = [json.loads(line)["prompt_id"] for line in DATASET.read_text().splitlines() if line.strip()]
    ids = dict(Conversation.objects.filter(prompt_id__in=prompt_ids).values_list("prompt_id", "id"))
    return {(user, ids[prompt_ids[line]]) for user, kinds in DEMO_TASKS.items() for line in kinds.get(kind, ())}


def _username(physician: Physician) -> str:
    """A demo physician's login name (each has an account; only imported raters have none)."""
    return physician.user.get_username() if physician.user else ""


def demo_tasks_create(*, physicians: list[Physician]) -> int:
    """Give each demo physician a few open tasks of every kind (again: nothing new)."""
    created = 0
    for physician in physicians:
        username = _username(physician)
        for kind in DEMO_TASKS.get(username, {}):
            conversation_ids = [cid for user, cid in _task_conversations(kind) if user == username]
            created += assignments_create(
                kind=kind,
                conversation_ids=sorted(conversation_ids),
                physicians=[physician],
                per_item=1,
                assigned_by=None,
            ).created
    return created


def demo_votes_create(*, physicians: list[Physician]) -> int:
    """Both demo physicians agreed that each attached consensus criterion applies (not where they have a vote task)."""
    attached = Criterion.objects.filter(
        conversation__subsets__name=DEMO_SUBSET, consensus_criterion__isnull=False
    ).values_list("conversation_id", "consensus_criterion_id")
    count = 0
    open_votes = _task_conversations(CONSENSUS_VOTE.value)
    for conversation_id, consensus_criterion_id in attached:
        for physician in physicians:
            if (_username(physician), conversation_id) in open_votes:
                continue
            ConsensusVote.objects.update_or_create(
                physician=physician,
                conversation_id=conversation_id,
                consensus_criterion_id=consensus_criterion_id,
                defaults={"applies": True},
            )
            count += 1
    return count


def demo_labels_create(*, physicians: list[Physician], responses: list[DemoResponse]) -> int:
    """Physician labels on the consensus criteria: the ground truth for the agreement report."""
    count = 0
    open_labels = _task_conversations(LABEL.value)
    for item in responses:
        for position, criterion in enumerate(_rubric(item.response.conversation_id)):
            if criterion.consensus_criterion_id is None:
                continue
            for index, physician in enumerate(physicians):
                if (_username(physician), item.response.conversation_id) in open_labels:
                    continue
                met = position in item.criteria_met
                # The first physician labels as the responses' author judged them; the others
                # disagree now and then, as real physicians do.
                sample = item.response.sample_index
                if index > 0 and _flip("label", criterion.conversation_id, sample, position, one_in=5):
                    met = not met
                PhysicianLabel.objects.update_or_create(
                    physician=physician, response=item.response, criterion=criterion, defaults={"met": met}
                )
                count += 1
    return count


@transaction.atomic
def demo_load(*, password: str) -> DemoSummary:
    accounts = demo_accounts_create(password=password)
    dataset = demo_dataset_import()
    responses = demo_responses_create()
    run, grades = demo_run_create(responses=responses)
    physicians = [p for p in accounts if p.role == Physician.Role.PHYSICIAN]
    votes = demo_votes_create(physicians=physicians)
    labels = demo_labels_create(physicians=physicians, responses=responses)
    tasks = demo_tasks_create(physicians=physicians)
    return DemoSummary(accounts, password, dataset, len(responses), run, grades, votes, labels, tasks)


class Command(BaseCommand):
    help = (
        "Load the demo: about ten conversations written for this project (subsets 'all' and 'demo'), "
        "demo accounts for each role, two responses per conversation from 'demo-model-a', a finished "
        "run 'demo-run' with its grades, and some consensus votes and physician labels. Running it "
        "again changes nothing but resets the demo accounts' passwords. Everything is written in one "
        "transaction."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--password",
            help=f"password for every demo account (default {DEFAULT_PASSWORD!r}; required when DEBUG is off)",
        )

    def handle(self, *args, password: str | None, **options):
        if password is None:
            if not settings.DEBUG:
                raise CommandError(
                    "DEBUG is off: pass --password so that the demo accounts do not get the published default"
                )
            password = DEFAULT_PASSWORD
        try:
            summary = demo_load(password=password)
        except ImportFailed as exc:
            raise CommandError(f"{DATASET} is not a valid HealthBench file:\n{exc}") from None
        self.stdout.write(
            f"Demo dataset: {summary.dataset}.\n"
            f"Demo run '{summary.run.name}': {summary.responses} responses, {summary.grades} grades; "
            f"{summary.votes} consensus votes, {summary.labels} physician labels; "
            f"{summary.tasks} open tasks given to the demo physicians."
        )
        self.stdout.write(f"Demo accounts (password: {summary.password}):")
        for p in summary.accounts:
            self.stdout.write(f"  {_username(p):<12} {p.role:<11} {p.specialty}, {p.country}")
