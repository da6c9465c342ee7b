import argparse
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from grading.metaeval.report import (
    CSV_COLUMNS,
    DEFAULT_SEED,
    N_RESAMPLES,
    report_csv,
    report_json,
    run_meta_eval_report,
)
from grading.models import Run


class Command(BaseCommand):
    help = "\n".join(
        [
            "Print how far run NAME's grader agrees with physicians on the consensus criteria.",
            "",
            "JSON: 'model' holds the grader's pairwise figures under the reference's metric names",
            "(pairwise_model_<precision|recall|f1>_<pos|neg|balanced>; per category prefixed '<cluster>: '),",
            "each {n, value}; 'physicians' maps every physician-side name to {physician: {n, value}}, a",
            "physician named by anonymized id, or by username when they have a login. Our extras: 'intervals'",
            f"({N_RESAMPLES}-resample bootstrap of the macro F1), 'ranks' (the grader among physicians),",
            "'disagreements' and 'ties' (prompt_id, completion_id, category, grader label, physician",
            "tallies), 'coverage' and 'settings'.",
            "",
            "CSV: one row per (scope, grader metric), columns:",
            *(f"  {name:<17} {meaning}" for name, meaning in CSV_COLUMNS),
        ]
    )

    def create_parser(self, prog_name, subcommand, **kwargs):
        # Keep the column list readable in --help instead of one reflowed paragraph.
        parser = super().create_parser(prog_name, subcommand, **kwargs)
        parser.formatter_class = argparse.RawDescriptionHelpFormatter
        return parser

    def add_arguments(self, parser):
        parser.add_argument("name", help="name of the run")
        parser.add_argument("--format", choices=["json", "csv"], default="json", dest="fmt")
        parser.add_argument("--out", type=Path, help="write to this file instead of standard output")
        parser.add_argument(
            "--seed", type=int, default=DEFAULT_SEED, help=f"bootstrap seed (default {DEFAULT_SEED}, as the web page)"
        )

    def handle(self, *args, name: str, fmt: str, out: Path | None, seed: int, **options):
        if seed < 0:
            raise CommandError("--seed must be 0 or more")
        run = Run.objects.filter(name=name).first()
        if run is None:
            raise CommandError(f"no run is named {name!r}")
        document = run_meta_eval_report(run=run, seed=seed)
        text = report_json(document) if fmt == "json" else report_csv(document)
        if out is None:
            self.stdout.write(text, ending="")
            return
        try:
            out.write_text(text)
        except OSError as exc:
            raise CommandError(f"cannot write {out}: {exc.strerror}") from None
        self.stderr.write(f"{out}: meta-eval report of run {name!r} ({document['coverage']['items']} items)")
