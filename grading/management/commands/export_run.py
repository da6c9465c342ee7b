from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from grading.models import Run
from grading.reports.report import DEFAULT_SEED
from grading.reports.results_file import dump_results
from grading.reports.run_export import run_export


class Command(BaseCommand):
    help = (
        "Write the run NAME as a simple-evals HealthBench results file (*_allresults.json), the format "
        "import_run reads: score and metrics in the reference's names, and per example the prompt, completion, "
        "prompt_id, completion_id, rubric items with criteria_met (null for a failed grade) and explanation, and "
        "the score. A length-adjusted run also writes each example's length_adjusted_score and its constants."
    )

    def add_arguments(self, parser):
        parser.add_argument("name", help="name of the run")
        parser.add_argument("--out", type=Path, help="write to this file instead of standard output")
        parser.add_argument(
            "--seed", type=int, default=DEFAULT_SEED, help=f"seed of the bootstrap stds (default {DEFAULT_SEED})"
        )

    def handle(self, *args, name: str, out: Path | None, seed: int, **options):
        try:
            run = Run.objects.get(name=name)
        except Run.DoesNotExist:
            raise CommandError(f"no run named {name!r}") from None
        export = run_export(run=run, seed=seed)
        if export.missing_grades:
            self.stderr.write(
                f"warning: {export.missing_grades} grade(s) of {name!r} were never made (is it still running?); "
                "the file leaves them out, so its responses look complete to the reference's tools"
            )
        text = dump_results(export.document)
        if out is None:
            self.stdout.write(text)
            return
        try:
            out.write_text(text)
        except OSError as exc:
            raise CommandError(f"cannot write {out}: {exc.strerror}") from None
        self.stderr.write(f"wrote {out}: {export.examples} examples")
