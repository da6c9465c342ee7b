"""Every run grades a fixed plan: a rubric or subset edit after a run changes nothing of it.

Runs of every kind finish (imported, re-graded, sampled on a subset never frozen before, on a
subset a curator had frozen, the demo run); then criteria are edited, added and deleted on
their conversations and subset members come and go. Every report, download, API answer and
page of those runs reads the same afterwards, byte for byte where it is a file; the report
page only adds that the live rubric moved, and offers to grade the difference.
"""

import json
import re
from io import StringIO

import pytest
from django.core.management import call_command
from django.db import IntegrityError, transaction
from django.test import Client
from django.urls import reverse
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from annotation.models import Conversation, Criterion, Physician, Subset
from annotation.services.rubric import criterion_create, criterion_delete, criterion_update
from annotation.services.subset_changes import subset_change_apply, subset_plan_add, subset_plan_remove
from annotation.services.subset_versions import subset_version_freeze
from grading.management.commands.load_demo import DEFAULT_PASSWORD
from grading.metaeval.report import run_meta_eval_report
from grading.models import Endpoint, Grade, Run
from grading.pipeline.batches import batch_run
from grading.pipeline.run_launch import run_launch
from grading.pipeline.run_request import RunRequest
from grading.reports.hard_subset import paired_conversation_mean_scores
from grading.reports.report import run_report
from tests import healthbench_rows as rows
from tests.endpoints import endpoint_on
from tests.grading_data import conversation_with_rubric, subset_of
from tests.people import person
from tests.test_import_run import graded_row, import_run, write_results

pytest_plugins = ["tests.llm_server"]
pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fast_retries")]

# The CSRF token is masked afresh in every response; nothing else of a page may move.
CSRF = re.compile(r'(csrfmiddlewaretoken" value="|X-CSRFToken": ")[^"]+')
DRIFT = re.compile(r'<div class="notice" id="rubric-drift".*?</div>\n', re.DOTALL)


def _grade_all(run: Run) -> None:
    for batch_id in run.batches.values_list("id", flat=True):
        batch_run(batch_id=batch_id)
    run.refresh_from_db()


def _policy(server) -> Endpoint:
    return Endpoint.objects.filter(name="test-policy").first() or endpoint_on(
        server, "test-policy", model="policy-1", temperature=0.7, max_output_tokens=300
    )


def _imported(tmp_path) -> Run:
    """A run brought in by import_run, on conversations whose criteria the test server grades alike."""
    data = [
        rows.row(
            f"imp-{k}",
            theme=theme,
            rubrics=[
                rows.rubric_item("Mentions need:kiwi.", 6),
                rows.rubric_item("Mentions need:mango.", 4, "accuracy"),
                rows.rubric_item("Mentions need:papaya, which it should not.", -5, "accuracy"),
            ],
        )
        for k, theme in enumerate(["hedging", "global_health"])
    ]
    dataset = tmp_path / "dataset.jsonl"
    rows.write(dataset, *data)
    call_command("import_healthbench", str(dataset), stdout=StringIO())
    completions = ["Try a kiwi.", "A kiwi and a mango.", "A papaya and a mango.", "Nothing of the sort."]
    examples = [
        graded_row(data[k % 2], [fruit in c for fruit in ("kiwi", "mango", "papaya")], completion=c)
        for k, c in enumerate(completions)
    ]
    import_run(write_results(tmp_path / "imported_allresults.json", examples), name="imported")
    return Run.objects.get(name="imported")


@pytest.fixture
def finished(llm_server, tmp_path):
    """One finished run of every kind, by name."""
    llm_server.retry_after = 0.05
    grader = endpoint_on(llm_server)
    call_command("load_demo", password=DEFAULT_PASSWORD, stdout=StringIO())
    imported = _imported(tmp_path)
    regrade = run_launch(spec=RunRequest(name="regraded", grader=grader, concurrency=4, responses_from=imported))
    _grade_all(regrade)
    live = subset_of("live", [conversation_with_rubric(i, n_criteria=4) for i in range(3)])
    sampled = run_launch(
        spec=RunRequest(name="sampled-live", grader=grader, subset=live, policy=_policy(llm_server), samples=2)
    )
    _grade_all(sampled)
    frozen = subset_of("frozen", [conversation_with_rubric(i, n_criteria=3) for i in range(3, 5)])
    subset_version_freeze(subset=frozen)
    on_version = run_launch(
        spec=RunRequest(name="sampled-frozen", grader=grader, subset=frozen, policy=_policy(llm_server), samples=1)
    )
    _grade_all(on_version)
    runs = {run.name: run for run in Run.objects.all()}
    assert {run.status for run in runs.values()} <= {Run.Status.DONE, Run.Status.IMPORTED}
    assert {run.name: run.plan for run in runs.values()} == {
        "demo-run": Run.Plan.SUBSET_VERSION,
        "imported": Run.Plan.STORED,
        "regraded": Run.Plan.SOURCE_RUN,
        "sampled-live": Run.Plan.SUBSET_VERSION,
        "sampled-frozen": Run.Plan.SUBSET_VERSION,
    }
    return runs


def _readers():
    user = person("reader", Physician.Role.RESEARCHER)
    client = Client()
    client.force_login(user)
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    return client, api


def _page(client: Client, url: str, **params) -> str:
    response = client.get(url, params)
    assert response.status_code == 200, url
    return CSRF.sub(r"\1", DRIFT.sub("", response.content.decode()))


def _everything(runs: dict[str, Run], client: Client, api: APIClient) -> dict[str, object]:
    """Every report, download, API answer and page of the runs, as the bytes a reader gets."""
    seen: dict[str, object] = {}
    for name, run in runs.items():
        run = Run.objects.get(id=run.id)
        seen[f"{name}: report"] = json.dumps(run_report(run=run).data, sort_keys=True)
        seen[f"{name}: page"] = _page(client, reverse("report_detail", args=[run.code]))
        seen[f"{name}: page 2"] = _page(client, reverse("report_detail", args=[run.code]), page=2)
        for download in ("report_json", "report_csv", "report_results"):
            seen[f"{name}: {download}"] = client.get(reverse(download, args=[run.code])).content
        out = StringIO()
        call_command("export_run", run.name, stdout=out, stderr=StringIO())
        seen[f"{name}: export_run"] = out.getvalue()
        for path in ("", "report/", "meta-eval/", "grades/"):
            answer = api.get(f"/api/runs/{run.name}/{path}")
            assert answer.status_code == 200, (name, path)
            seen[f"{name}: api {path}"] = answer.content
        status = api.get(f"/api/runs/{run.name}/").json()
        assert status["total_items"] == status["progress"]["total"] == Grade.objects.filter(run=run).count()
        seen[f"{name}: meta-eval"] = json.dumps(run_meta_eval_report(run=run), sort_keys=True, default=str)
        seen[f"{name}: meta-eval page"] = _page(client, reverse("metaeval_report"), run=str(run.code))
        seen[f"{name}: meta-eval csv"] = client.get(
            reverse("metaeval_download", args=["csv"]), {"run": str(run.code)}
        ).content
        for grade in Grade.objects.filter(run=run).select_related("response").order_by("response_id")[::7]:
            url = reverse("report_transcript", args=[run.code, grade.response.code])
            seen[f"{name}: transcript {grade.response_id}"] = _page(client, url)
    for a, b in (("imported", "regraded"), ("sampled-live", "sampled-frozen"), ("demo-run", "imported")):
        codes = {"a": str(runs[a].code), "b": str(runs[b].code)}
        seen[f"compare {a} {b}"] = _page(client, reverse("compare_runs"), **codes)
        seen[f"compare {a} {b} json"] = client.get(reverse("compare_runs_json"), codes).content
    seen["hard builder"] = paired_conversation_mean_scores(list(runs.values()))
    return seen


def _move_every_rubric(runs: dict[str, Run]) -> None:
    """Edit, add and delete criteria of every run's conversations; change subset members."""
    curator = Physician.objects.get(user__username="curator")
    for run in runs.values():
        conversation_ids = sorted(set(Grade.objects.filter(run=run).values_list("response__conversation", flat=True)))
        first = Conversation.objects.get(id=conversation_ids[0])
        example = first.criteria.filter(level=Criterion.Level.EXAMPLE).order_by("position")
        criterion_update(
            physician=curator, criterion=example[0], text=example[0].text + " Edited.", points=9, axis="accuracy"
        )
        criterion_delete(physician=curator, criterion=example.reverse()[0])
        for conversation_id in conversation_ids[:3]:
            criterion_create(
                physician=curator,
                conversation=Conversation.objects.get(id=conversation_id),
                text=f"Mentions need:guava for {conversation_id}.",
                points=3,
                axis="completeness",
            )
    for name, change in (("live", subset_plan_remove), ("frozen", subset_plan_add), ("demo", subset_plan_remove)):
        subset = Subset.objects.get(name=name)
        other = Conversation.objects.exclude(subsets=subset).first() if change is subset_plan_add else None
        ids = [other.id] if other else [subset.conversations.order_by("id").first().id]
        subset_change_apply(subset=subset, plan=change(subset=subset, conversation_ids=ids, action="test"))


def test_no_number_of_a_finished_run_moves_when_rubrics_and_subsets_change(finished):
    client, api = _readers()
    before = _everything(finished, client, api)
    _move_every_rubric(finished)
    after = _everything(finished, client, api)
    changed = [key for key in before if before[key] != after[key]]
    if changed:
        import difflib

        for key in changed[:3]:
            a, b = (str(x[key]).splitlines() for x in (before, after))
            print(key, "\n".join(list(difflib.unified_diff(a, b, lineterm=""))[:40]))
    assert changed == []


def test_the_report_page_says_how_the_live_rubric_moved_and_grades_the_difference(finished):
    client, _ = _readers()
    demo = finished["demo-run"]
    _move_every_rubric(finished)
    page = client.get(reverse("report_detail", args=[demo.code])).content.decode()
    assert "3 criteria added, 1 edited, 1 deleted since this run" in page
    link = re.search(r'href="([^"]*rubric_changes=on[^"]*)"', page)
    assert link is not None
    form = client.get(link.group(1).replace("&amp;", "&"))
    assert form.status_code == 200
    fields = form.context["form"].initial
    assert fields["responses_from"] == str(demo.code)
    assert fields["rubric_changes"] is True
    choice = {
        "name": "demo changes",
        "source": "responses",
        "responses_from": str(demo.code),
        "rubric_changes": "on",
        "grader": "test-grader",
        "concurrency": 4,
        "samples": 1,
        "use_cache": "on",
    }
    estimate = client.post(reverse("run_new"), choice)
    changed = set(Criterion.objects.filter(text__contains="need:guava").values_list("id", flat=True))
    changed |= set(Criterion.objects.filter(text__endswith=" Edited.").values_list("id", flat=True))
    assert estimate.context["estimate"] is not None
    launched = client.post(reverse("run_new"), {**choice, "action": "launch"})
    assert launched.status_code == 302
    run = Run.objects.get(name="demo changes")
    assert run.plan == Run.Plan.RUBRIC_CHANGES
    _grade_all(run)
    graded = set(Grade.objects.filter(run=run).values_list("criterion_id", flat=True))
    assert graded
    assert graded <= changed
    # Each of the demo's two responses per conversation, on that conversation's changes.
    assert run.total_items == Grade.objects.filter(run=run).count() == 2 * 4
    assert run_report(run=run).data["counts"]["missing"] == 0


def test_a_run_without_a_plan_cannot_be_stored(db):
    for fields in ({}, {"plan": Run.Plan.SUBSET_VERSION}, {"plan": Run.Plan.SOURCE_RUN}, {"plan": "live"}):
        with pytest.raises(IntegrityError), transaction.atomic():
            Run.objects.create(name="no plan", **fields)
