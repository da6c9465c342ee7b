"""The grading modes' one table (grading.pipeline.modes): it names the modes the database
accepts, and a mode registered there alone is launched, estimated, graded, counted and offered
by the command, with no other module naming it."""

import io

import pytest
from django.core.management import call_command

from grading.models import Grade, GraderConfig, GradingMode, Run
from grading.pipeline.batches import batch_run
from grading.pipeline.estimate import plan_estimate, run_plan, spec_check
from grading.pipeline.modes import DEFAULT, FALLBACK, MODES, mode_of
from grading.pipeline.modes.base import EstimateCounts
from grading.pipeline.modes.per_criterion import PerCriterion
from grading.pipeline.progress import run_progress
from grading.pipeline.run_launch import run_launch
from grading.pipeline.run_request import RunSpecError, run_request
from grading.reports.grader_marks import prompt_difference
from tests.endpoints import endpoint_on
from tests.grading_data import imported_run

pytest_plugins = ["tests.llm_server"]
pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fast_retries")]


class Brief(PerCriterion):
    """A mode of a test: asked as per criterion, counted at half the answer tokens."""

    name = "brief-criterion"

    def snapshot_fields(self, explanation: str) -> dict:
        return {"grading_mode": self.name}

    def answer_tokens(self, explanation: str, *, calls: int, grades: int) -> int:
        return calls * 40

    def estimate_line(self, counts: EstimateCounts) -> str:
        return f"Grading briefly: {counts.grader_calls:,} grader calls on {counts.responses:,} responses."


def test_the_table_names_the_modes_the_database_accepts():
    assert list(MODES) == list(GradingMode.values)
    assert all(mode.name == name for name, mode in MODES.items())
    longest = max(len(name) for name in MODES)
    for field in (GraderConfig._meta.get_field("grading_mode"), Grade._meta.get_field("mode")):
        assert longest <= (field.max_length or 0)
    assert DEFAULT == FALLBACK == GradingMode.PER_CRITERION
    assert mode_of("") is MODES[DEFAULT]
    assert [name for name, mode in MODES.items() if mode.takes_explanation] == [GradingMode.PER_RESPONSE]


def test_a_mode_in_the_table_alone_is_launched_estimated_graded_and_offered(llm_server, monkeypatch):
    brief = Brief()
    monkeypatch.setitem(MODES, brief.name, brief)
    source = imported_run(conversations=2, samples=1, n_criteria=3)
    grader = endpoint_on(llm_server)
    spec = run_request(name="brief", grader=grader, responses_from=source, grading_mode=brief.name, concurrency=4)
    spec_check(spec)
    estimate = plan_estimate(spec, run_plan(spec))
    assert "Grading briefly: 6 grader calls on 2 responses." in estimate.lines()
    assert estimate.completion_tokens == 6 * 40
    run = run_launch(spec=spec)
    for batch_id in run.batches.values_list("id", flat=True):
        batch_run(batch_id=batch_id)
    run.refresh_from_db()
    assert run.status == Run.Status.DONE, run.error
    assert run.grader_config is not None
    assert run.grader_config.grading_mode == brief.name
    assert set(Grade.objects.filter(run=run).values_list("mode", flat=True)) == {brief.name}
    assert run_progress(run=run).fallbacks == 0
    assert prompt_difference(run) == "graded in the brief-criterion mode, not per criterion"
    out = io.StringIO()
    call_command(
        "grade",
        *("--name", "cli", "--grader", grader.name, "--responses-from", source.name),
        *("--grading-mode", brief.name, "--estimate-only"),
        stdout=out,
    )
    assert "Grading briefly: 6 grader calls" in out.getvalue()


def test_a_name_outside_the_table_is_refused_with_the_tables_names(llm_server):
    source = imported_run(conversations=1, samples=1, n_criteria=2)
    spec = run_request(name="x", grader=endpoint_on(llm_server), responses_from=source, grading_mode="per-call")
    with pytest.raises(RunSpecError, match="is not one of per-criterion, per-response"):
        spec_check(spec)
