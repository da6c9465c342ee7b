import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from grading.models import Run
from grading.reports.report import DEFAULT_SEED, report_csv, run_report


class Command(BaseCommand):
    help = (
        "Score report of the run NAME. JSON (default): one object {score, metrics, worst_at_k, "
        "consensus_error_rates, length_score_correlation, counts, reused}; metrics use simple-evals' names "
        "(overall_score, theme:..., axis:..., cluster:..., each with :n_samples and :bootstrap_std). "
        "CSV: a header 'name,value,n_samples,bootstrap_std', then one row per metric: score first, then "
        "every metric by name. Responses with a failed or missing grade are left out of every score and "
        "counted under counts."
    )

    def add_arguments(self, parser):
        parser.add_argument("name", help="name of the run")
        parser.add_argument("--format", choices=["json", "csv"], default="json", help="output format (default json)")
        parser.add_argument("--out", type=Path, help="write to this file instead of standard output")
        parser.add_argument(
            "--seed",
            type=int,
            default=DEFAULT_SEED,
            help=f"seed of the bootstrap resamples, so a report can be reproduced (default {DEFAULT_SEED})",
        )

    def handle(self, *args, name: str, format: str, out: Path | None, seed: int, **options):
        try:
            run = Run.objects.get(name=name)
        except Run.DoesNotExist:
            raise CommandError(f"no run named {name!r}") from None
        data = run_report(run=run, seed=seed).data
        text = json.dumps(data, indent=2) + "\n" if format == "json" else report_csv(data)
        if out is None:
            self.stdout.write(text, ending="")
            return
        try:
            out.write_text(text)
        except OSError as exc:
            raise CommandError(f"cannot write {out}: {exc.strerror}") from None
        self.stderr.write(f"wrote {out}")
