"""grade: launch a grading run, resume or cancel one, and optionally wait for it.

    grade --name NAME --grader-model M [--grader-base-url URL] [--grader-api-key-env VAR]
          [--concurrency N] (--responses-from RUN | --policy-model P --samples K --subset S)
          [--wait] [--no-cache] [--estimate-only]
    grade --resume NAME [--retry-failed] [--wait]
    grade --cancel NAME

Workers do the work (celery -A healthbench_web worker); this command queues it, after
printing an estimate of the calls and tokens.
"""

import os
import time

from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotation.models import Subset
from grading.models import Run
from grading.pipeline.estimate import EndpointSpec, RunSpec, RunSpecError, plan_estimate, run_plan, spec_check
from grading.pipeline.grader_prompt import DEFAULT_TEMPLATE, TemplateError, load_template
from grading.pipeline.progress import run_progress
from grading.pipeline.runs import run_cancel, run_launch, run_resume

POLL_SECONDS = 2.0
STALL_HINT_SECONDS = 30.0


def _limit(value: str) -> int | None:
    return int(value) if value else None


class Command(BaseCommand):
    help = "Grade responses with an LLM grader on Celery workers; or resume or cancel a run."

    def add_arguments(self, parser: CommandParser) -> None:
        action = parser.add_mutually_exclusive_group(required=True)
        action.add_argument("--name", help="name of the new run")
        action.add_argument("--resume", metavar="NAME", help="queue again what a run is missing")
        action.add_argument("--cancel", metavar="NAME", help="stop a run")

        grader = parser.add_argument_group("grader")
        grader.add_argument("--grader-model")
        grader.add_argument("--grader-base-url", default="", help="OpenAI-compatible endpoint; empty for OpenAI")
        grader.add_argument(
            "--grader-api-key-env", default="OPENAI_API_KEY", help='variable holding the key; "" for none'
        )
        grader.add_argument("--grader-temperature", type=float, default=0.0)
        grader.add_argument("--grader-max-tokens", type=int, default=2048)
        grader.add_argument("--grader-timeout", type=float, default=60.0, help="seconds per request")
        grader.add_argument("--grader-rpm", type=_limit, default=None, help="requests per minute, all workers together")
        grader.add_argument("--grader-tpm", type=_limit, default=None, help="tokens per minute, all workers together")
        grader.add_argument(
            "--grader-template", metavar="FILE", help="a template with <<conversation>> and <<rubric_item>>"
        )

        source = parser.add_argument_group("what to grade")
        source.add_argument(
            "--responses-from", metavar="RUN", help="grade the responses of RUN on the criteria it graded"
        )
        source.add_argument("--policy-model", help="sample responses from this model")
        source.add_argument("--policy-base-url", default="")
        source.add_argument("--policy-api-key-env", default="OPENAI_API_KEY")
        source.add_argument("--policy-temperature", type=float, default=1.0)
        source.add_argument("--policy-max-tokens", type=int, default=2048)
        source.add_argument("--policy-timeout", type=float, default=120.0)
        source.add_argument("--samples", type=int, default=1, help="responses per conversation")
        source.add_argument("--subset", help="the subset whose conversations are sampled")

        parser.add_argument("--concurrency", type=int, default=16, help="grader calls in flight, all workers together")
        parser.add_argument(
            "--no-cache", action="store_true", help="call the grader even for identical earlier requests"
        )
        parser.add_argument(
            "--length-adjusted",
            action="store_true",
            help="also report HealthBench Professional's length-adjusted scores (0.0147 per 500 characters from 2,000)",
        )
        parser.add_argument(
            "--professional", action="store_true", help="mark the run HealthBench Professional (length-adjusted)"
        )
        parser.add_argument("--estimate-only", action="store_true", help="print the estimate and stop")
        parser.add_argument("--retry-failed", action="store_true", help="with --resume: grade failed grades again")
        parser.add_argument("--wait", action="store_true", help="print progress until the run ends")

    def handle(self, *args, **options) -> None:
        if options["cancel"]:
            run = self._run(options["cancel"])
            if not run_cancel(run=run):
                raise CommandError(f"run {run.name!r} is {run.status}, not running: nothing to cancel")
            self.stdout.write(f"Cancelled {run.name}.")
            return
        if options["resume"]:
            run = self._run(options["resume"])
            try:
                queued = run_resume(run=run, retry_failed=options["retry_failed"])
            except RunSpecError as exc:
                raise CommandError(str(exc)) from None
            self.stdout.write(
                f"Resumed {run.name}: {queued} batch(es) queued." if queued else f"{run.name} is complete."
            )
        else:
            run = self._launch(options)
            if run is None:
                return
        if options["wait"]:
            self._wait(run)

    def _run(self, name: str) -> Run:
        try:
            return Run.objects.get(name=name)
        except Run.DoesNotExist:
            raise CommandError(f"no run named {name!r}") from None

    def _spec(self, options) -> RunSpec:
        try:
            template = load_template(options["grader_template"]) if options["grader_template"] else DEFAULT_TEMPLATE
        except TemplateError as exc:
            raise CommandError(str(exc)) from None
        responses_from = self._run(options["responses_from"]) if options["responses_from"] else None
        subset = None
        if options["subset"]:
            try:
                subset = Subset.objects.get(name=options["subset"])
            except Subset.DoesNotExist:
                raise CommandError(f"no subset named {options['subset']!r}") from None
        policy = None
        if options["policy_model"]:
            policy = EndpointSpec(
                model=options["policy_model"],
                base_url=options["policy_base_url"],
                api_key_env=options["policy_api_key_env"],
                temperature=options["policy_temperature"],
                max_tokens=options["policy_max_tokens"],
                timeout=options["policy_timeout"],
            )
        return RunSpec(
            name=options["name"],
            grader=EndpointSpec(
                model=options["grader_model"] or "",
                base_url=options["grader_base_url"],
                api_key_env=options["grader_api_key_env"],
                temperature=options["grader_temperature"],
                max_tokens=options["grader_max_tokens"],
                timeout=options["grader_timeout"],
                requests_per_minute=options["grader_rpm"],
                tokens_per_minute=options["grader_tpm"],
            ),
            template=template,
            concurrency=options["concurrency"],
            use_cache=not options["no_cache"],
            responses_from=responses_from,
            subset=subset,
            policy=policy,
            samples=options["samples"],
            length_adjusted=options["length_adjusted"],
            healthbench_professional=options["professional"],
        )

    def _launch(self, options) -> Run | None:
        spec = self._spec(options)
        try:
            spec_check(spec)
            plan = run_plan(spec)
        except RunSpecError as exc:
            raise CommandError("\n".join(exc.problems)) from None
        self.stdout.write(f"Estimate for {spec.name}:")
        for line in plan_estimate(spec, plan).lines():
            self.stdout.write(f"  {line}")
        for endpoint in filter(None, (spec.grader, spec.policy)):
            if endpoint.api_key_env and not os.environ.get(endpoint.api_key_env):
                self.stderr.write(f"warning: {endpoint.api_key_env} is not set here; the workers need it")
        if options["estimate_only"]:
            return None
        try:
            run = run_launch(spec=spec, plan=plan)
        except RunSpecError as exc:
            raise CommandError("\n".join(exc.problems)) from None
        self.stdout.write(f"Launched {run.name}: {run.total_items:,} grades in {run.batches.count()} batches.")
        return run

    def _wait(self, run: Run) -> None:
        last_done, last_change, hinted = -1, time.monotonic(), False
        while True:
            run.refresh_from_db()
            progress = run_progress(run=run)
            self.stdout.write(f"{run.status:9} {progress.line()}")
            if not run.is_active:
                break
            if progress.done != last_done:
                last_done, last_change = progress.done, time.monotonic()
            elif not hinted and time.monotonic() - last_change > STALL_HINT_SECONDS:
                self.stderr.write("no progress for 30 s: is a worker running? (celery -A healthbench_web worker)")
                hinted = True
            time.sleep(POLL_SECONDS)
        if run.status != Run.Status.DONE:
            raise CommandError(f"run {run.name} ended {run.status}{': ' + run.error if run.error else ''}")
        self.stdout.write(f"Done: {run.name}")
