"""A grading run as asked for (RunRequest), and the one function that builds it (run_request)
for every way into a run: the launch page, the API, `manage.py grade` and the meta-eval page's
comparison. Each resolves its own names (a form field, a serializer field, an option) and
hands the rest here, so a grader template's line endings, a stored template and the defaults
come out the same whichever way a run was asked for (tests/test_run_request.py).

grading.pipeline.estimate checks a request (spec_check) and plans it; run_launch launches
nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass

from annotation.models import Subset
from grading.models import Endpoint, GraderTemplate, Run
from grading.pipeline import response_prompt
from grading.pipeline.grader_prompt import DEFAULT_TEMPLATE
from grading.pipeline.modes import DEFAULT

DEFAULT_CONCURRENCY = 16


class RunSpecError(ValueError):
    """What is wrong with a run request, one problem a line."""

    def __init__(self, problems: list[str]):
        super().__init__("; ".join(problems))
        self.problems = problems


@dataclass(frozen=True)
class RunRequest:
    """A grading run as asked for: grade the responses of `responses_from` again, or sample
    `samples` responses per conversation of `subset` from `policy` and grade those, or grade
    the physicians' responses of `subset`'s HealthBench Professional rows
    (`physician_responses`), or grade the physician-labelled items. Built by run_request;
    `template` is the grader template's text as the run will store it (its sha256 is the
    run's prompt hash)."""

    name: str
    grader: Endpoint | None
    template: str = DEFAULT_TEMPLATE
    concurrency: int = DEFAULT_CONCURRENCY
    use_cache: bool = True
    responses_from: Run | None = None
    subset: Subset | None = None
    policy: Endpoint | None = None
    samples: int = 1
    # With responses_from: grade its responses only on the criteria added or edited since it
    # was graded (grading.plans.rubric_drift), as they are now.
    rubric_changes: bool = False
    # Grade every (response, consensus criterion) that physicians labelled, as stored now
    # (the meta-eval's items: grading.plans.labelled_rubric), with no source run.
    labelled: bool = False
    # Grade the physician response of each conversation of `subset` that has one (its
    # Professional row's physician_response: grading.pipeline.physician_responses), with no
    # policy: the physician baseline, reported under the "model" name "physician".
    physician_responses: bool = False
    # Scoring options of the run (its report, not its grades): see Run.scores_length_adjusted.
    length_adjusted: bool = False
    healthbench_professional: bool = False
    grading_mode: str = DEFAULT
    # Per response: what each verdict explains itself in (response_prompt.EXPLANATIONS).
    explanation_length: str = ""
    # Graded through the provider's Batch API (grading.pipeline.provider_batches), at its prices.
    batch: bool = False

    @property
    def explanation(self) -> str:
        return self.explanation_length or response_prompt.DEFAULT_EXPLANATION


def template_text(text: str) -> str:
    """A grader template as given (a page's text box, an API field, a file): Windows and old
    Mac line endings read as newlines, and the whitespace around it dropped (as a form field
    drops it; a file ends with a newline), so the same words give the same template hash."""
    return text.replace("\r\n", "\n").replace("\r", "\n").strip()


def run_request(
    *,
    name: str,
    grader: Endpoint | None,
    template: str = "",
    stored_template: GraderTemplate | None = None,
    responses_from: Run | None = None,
    labelled: bool = False,
    physician_responses: bool = False,
    rubric_changes: bool = False,
    subset: Subset | None = None,
    policy: Endpoint | None = None,
    samples: int = 1,
    concurrency: int = DEFAULT_CONCURRENCY,
    use_cache: bool = True,
    length_adjusted: bool = False,
    healthbench_professional: bool = False,
    grading_mode: str = "",
    explanation_length: str = "",
    batch: bool = False,
) -> RunRequest:
    """The request every door launches. `template`: a grader template's text (empty for
    ours); `stored_template`: one stored with `grader_template import`, used as stored (its
    sha256 is the one it was stored with); not both. An empty mode is per criterion. An
    explanation length belongs to the per-response mode (spec_check refuses it with another):
    the pages, which always send their field, pass it with that mode only.
    Raises RunSpecError; everything else is checked by estimate.spec_check."""
    if stored_template is not None and template.strip():
        raise RunSpecError(["give a grader template's text or choose a stored one, not both"])
    text = stored_template.text if stored_template is not None else template_text(template) or DEFAULT_TEMPLATE
    return RunRequest(
        name=name.strip(),
        grader=grader,
        template=text,
        concurrency=concurrency,
        use_cache=use_cache,
        responses_from=responses_from,
        labelled=labelled,
        physician_responses=physician_responses,
        rubric_changes=rubric_changes,
        subset=subset,
        policy=policy,
        samples=samples,
        length_adjusted=length_adjusted,
        healthbench_professional=healthbench_professional,
        grading_mode=grading_mode or DEFAULT,
        explanation_length=explanation_length,
        batch=batch,
    )
