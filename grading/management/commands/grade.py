"""grade: launch a grading run, resume or cancel one, and optionally wait for it.

    grade --name NAME --grader ENDPOINT [--concurrency N]
          (--responses-from RUN | --policy ENDPOINT --samples K --subset S
           | --physician-responses --subset S | --labelled)
          [--grading-mode per-criterion|per-response [--explanation words|sentence|sentences]]
          [--batch] [--wait] [--no-cache] [--estimate-only]
    grade --resume NAME [--retry-failed [--live | --as-batch]] [--wait]
    grade --cancel NAME

--labelled grades every (response, consensus criterion) that physicians labelled (the items
of an imported meta-eval file): `meta_eval RUN` then reports the grader's agreement with them.

--physician-responses --subset S grades the physician response of each HealthBench Professional
row of S on its rubric: the physician baseline, whose report names its model "physician".

Workers do the work (celery -A healthbench_web worker); this command queues it, after
printing an estimate of the calls, tokens and cost. Graders and policy models are curated
endpoints, named here; their URLs and key variables are not options of this command.

With --batch the grader's requests go through the provider's Batch API (at its discount,
answers within 24 hours); a batched run's failed or expired requests are retried with
--resume NAME --retry-failed, in a new provider batch, or by live calls with --live.
"""

import argparse
import time

from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotation.models import Subset
from grading.endpoint_rules import RAW_FIELDS_MESSAGE
from grading.endpoints.listing import endpoint_lines
from grading.models import Endpoint, GraderTemplate, Run
from grading.pipeline.estimate import plan_estimate, run_plan, spec_check
from grading.pipeline.grader_prompt import TemplateError, load_template
from grading.pipeline.modes import DEFAULT, MODES
from grading.pipeline.progress import run_progress
from grading.pipeline.response_prompt import CRITERIA_PER_CALL, EXPLANATIONS
from grading.pipeline.run_launch import run_launch
from grading.pipeline.run_request import DEFAULT_CONCURRENCY, RunRequest, RunSpecError, run_request
from grading.pipeline.runs import QueueUnavailable, run_cancel, run_resume

POLL_SECONDS = 2.0
STALL_HINT_SECONDS = 30.0


# Options of the command before endpoints: given, they stop it with what to do instead.
RAW_OPTIONS = (
    "grader_model",
    "grader_base_url",
    "grader_api_key_env",
    "grader_temperature",
    "grader_max_tokens",
    "grader_timeout",
    "grader_rpm",
    "grader_tpm",
    "policy_model",
    "policy_base_url",
    "policy_api_key_env",
    "policy_temperature",
    "policy_max_tokens",
    "policy_timeout",
)


class Command(BaseCommand):
    help = "Grade responses with an LLM grader on Celery workers; or resume or cancel a run."

    def add_arguments(self, parser: CommandParser) -> None:
        action = parser.add_mutually_exclusive_group(required=False)
        action.add_argument("--name", help="name of the new run")
        action.add_argument("--resume", metavar="NAME", help="queue again what a run is missing")
        action.add_argument("--cancel", metavar="NAME", help="stop a run")

        grader = parser.add_argument_group("grader")
        grader.add_argument("--grader", metavar="ENDPOINT", help="the grader endpoint, by name")
        template = grader.add_mutually_exclusive_group()
        template.add_argument(
            "--grader-template", metavar="FILE", help="a template with <<conversation>> and <<rubric_item>>"
        )
        template.add_argument(
            "--template", metavar="NAME", help="a stored grader template (grader_template import, grader_template list)"
        )

        grader.add_argument(
            "--grading-mode",
            choices=list(MODES),
            default=DEFAULT,
            help="per-criterion: one call per response and criterion (the reference's way); per-response: "
            f"every criterion of a response in one call (up to {CRITERIA_PER_CALL} a call)",
        )
        grader.add_argument(
            "--explanation",
            choices=list(EXPLANATIONS),
            default="",
            help="per-response only: each verdict explained in a few words, one sentence (default) or two or three",
        )

        self._source_arguments(parser)
        parser.add_argument("--list-endpoints", action="store_true", help="list the endpoints and stop")

        # Refused (see RAW_OPTIONS): kept so that an old script gets a clear message.
        for option in RAW_OPTIONS:
            parser.add_argument("--" + option.replace("_", "-"), dest=option, default=None, help=argparse.SUPPRESS)

        parser.add_argument(
            "--concurrency", type=int, default=DEFAULT_CONCURRENCY, help="grader calls in flight, all workers together"
        )
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
        parser.add_argument(
            "--batch", action="store_true", help="grade through the provider's Batch API (cheaper, within 24 hours)"
        )
        parser.add_argument("--retry-failed", action="store_true", help="with --resume: grade failed grades again")
        how = parser.add_mutually_exclusive_group()
        how.add_argument(
            "--live", action="store_true", help="with --retry-failed, for a batched run: retry by live calls"
        )
        how.add_argument(
            "--as-batch",
            action="store_true",
            help="with --retry-failed, for a batched run: retry in a new provider batch (the default)",
        )
        parser.add_argument("--wait", action="store_true", help="print progress until the run ends")

    def _source_arguments(self, parser: CommandParser) -> None:
        """What to grade: one of four sources."""
        source = parser.add_argument_group(
            "what to grade",
            "exactly one of: --responses-from RUN; --policy ENDPOINT --subset S [--samples K]; "
            "--physician-responses --subset S; --labelled",
        )
        source.add_argument(
            "--responses-from", metavar="RUN", help="grade the responses of RUN on the criteria it graded"
        )
        source.add_argument(
            "--labelled",
            action="store_true",
            help="grade every physician-labelled (response, consensus criterion), for `meta_eval`",
        )
        source.add_argument(
            "--physician-responses",
            action="store_true",
            help="with --subset: grade the physicians' responses of its HealthBench Professional rows",
        )
        source.add_argument("--policy", metavar="ENDPOINT", help="sample responses from this endpoint")
        source.add_argument("--samples", type=int, default=1, help="responses per conversation")
        source.add_argument(
            "--subset", help="the subset whose conversations are sampled (or whose physician responses are graded)"
        )

    def handle(self, *args, **options) -> None:
        raw = [option for option in RAW_OPTIONS if options.get(option) is not None]
        if raw:
            given = ", ".join("--" + option.replace("_", "-") for option in raw)
            raise CommandError(f"{given}: {RAW_FIELDS_MESSAGE} ({self._endpoint_names()})")
        if options["list_endpoints"]:
            for line in endpoint_lines():
                self.stdout.write(line)
            return
        if not (options["name"] or options["resume"] or options["cancel"]):
            raise CommandError("one of --name, --resume, --cancel or --list-endpoints is required")
        if options["cancel"]:
            run = self._run(options["cancel"])
            if not run_cancel(run=run):
                raise CommandError(f"run {run.name!r} is {run.status}, not running: nothing to cancel")
            self.stdout.write(f"Cancelled {run.name}.")
            return
        if options["resume"]:
            run = self._run(options["resume"])
            try:
                if (options["live"] or options["as_batch"]) and not (options["retry_failed"] and run.batch):
                    raise CommandError("--live and --as-batch go with --retry-failed, for a batched run")
                live = True if options["live"] else False if options["as_batch"] else None
                queued = run_resume(run=run, retry_failed=options["retry_failed"], live=live)
            except RunSpecError as exc:
                raise CommandError("\n".join(exc.problems)) from None
            except QueueUnavailable as exc:
                raise CommandError(str(exc)) from None
            self.stdout.write(
                f"Resumed {run.name}: {queued} batch(es) queued." if queued else f"{run.name} is complete."
            )
        else:
            launched = self._launch(options)
            if launched is None:
                return
            run = launched
        if options["wait"]:
            self._wait(run)

    def _run(self, name: str) -> Run:
        try:
            return Run.objects.get(name=name)
        except Run.DoesNotExist:
            raise CommandError(f"no run named {name!r}") from None

    def launch_request(self, options) -> RunRequest:
        """The run the options ask for (grading.pipeline.run_request, as every door builds it)."""
        try:
            template = load_template(options["grader_template"]) if options["grader_template"] else ""
        except TemplateError as exc:
            raise CommandError(str(exc)) from None
        stored = None
        if options["template"]:
            stored = GraderTemplate.objects.filter(name=options["template"]).first()
            if stored is None:
                names = ", ".join(GraderTemplate.objects.values_list("name", flat=True)[:20]) or "none yet"
                raise CommandError(f"no grader template named {options['template']!r} (stored: {names})")
        responses_from = self._run(options["responses_from"]) if options["responses_from"] else None
        subset = None
        if options["subset"]:
            try:
                subset = Subset.objects.get(name=options["subset"])
            except Subset.DoesNotExist:
                raise CommandError(f"no subset named {options['subset']!r}") from None
        if not options["grader"]:
            raise CommandError(f"--grader ENDPOINT is required ({self._endpoint_names()})")
        try:
            return run_request(
                name=options["name"],
                grader=self._endpoint(options["grader"]),
                template=template,
                stored_template=stored,
                concurrency=options["concurrency"],
                use_cache=not options["no_cache"],
                responses_from=responses_from,
                labelled=options["labelled"],
                physician_responses=options["physician_responses"],
                subset=subset,
                policy=self._endpoint(options["policy"]) if options["policy"] else None,
                samples=options["samples"],
                length_adjusted=options["length_adjusted"],
                healthbench_professional=options["professional"],
                grading_mode=options["grading_mode"],
                explanation_length=options["explanation"],
                batch=options["batch"],
            )
        except RunSpecError as exc:
            raise CommandError("\n".join(exc.problems)) from None

    def _endpoint_names(self) -> str:
        names = list(Endpoint.objects.order_by("name").values_list("name", flat=True)[:20])
        return "endpoints: " + ", ".join(names) if names else "no endpoints yet: a curator adds them"

    def _endpoint(self, name: str) -> Endpoint:
        try:
            return Endpoint.objects.get(name=name)
        except Endpoint.DoesNotExist:
            raise CommandError(f"no endpoint named {name!r} ({self._endpoint_names()})") from None

    def _launch(self, options) -> Run | None:
        spec = self.launch_request(options)
        try:
            spec_check(spec)
            plan = run_plan(spec)
        except RunSpecError as exc:
            raise CommandError("\n".join(exc.problems)) from None
        self.stdout.write(f"Estimate for {spec.name}:")
        for line in plan_estimate(spec, plan).lines():
            self.stdout.write(f"  {line}")
        if options["estimate_only"]:
            return None
        try:
            run = run_launch(spec=spec, plan=plan)
        except RunSpecError as exc:
            raise CommandError("\n".join(exc.problems)) from None
        except QueueUnavailable as exc:
            raise CommandError(str(exc)) from None
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
        if progress.sample_notes:
            self.stderr.write(f"warning: {progress.sample_notes}")
        if run.status != Run.Status.DONE:
            raise CommandError(f"run {run.name} ended {run.status}{': ' + run.error if run.error else ''}")
        if progress.warning:
            self.stderr.write(f"warning: {progress.warning}")
        self.stdout.write(f"Done: {run.name}")
