import mmap
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from annotation.formats.validation import NO_ROWS
from grading.reports.results_file import ResultsInvalid, parse_results_file
from grading.reports.run_import import RunImportFailed, format_prompt_ids, run_import


class Command(BaseCommand):
    help = (
        "Import the results file simple-evals writes for a HealthBench run (*_allresults.json) as a run "
        "named NAME: one response per example (repeated prompt_ids are further samples) and one grade per "
        "graded rubric item; criteria_met null is a grade that failed. Conversations are found by prompt_id, "
        "so import the dataset with import_healthbench first. The file is imported in one transaction: on "
        "any error nothing is written and each bad example is listed with its field."
    )

    def add_arguments(self, parser):
        parser.add_argument("file", type=Path, help="path to the *_allresults.json file")
        parser.add_argument("--name", required=True, help="name of the new run (must not exist yet)")
        parser.add_argument(
            "--skip-unknown",
            action="store_true",
            help="leave out examples whose prompt_id is not in the database (listed) instead of failing",
        )

    def handle(self, *args, file: Path, name: str, skip_unknown: bool, **options):
        try:
            handle = file.open("rb")
        except OSError as exc:
            raise CommandError(f"cannot read {file}: {exc.strerror}") from None
        with handle:
            if file.stat().st_size == 0:
                raise CommandError(f"{file}: {NO_ROWS}; the database is unchanged")
            # Mapped, not read: a paper-size file is gigabytes and only its examples are decoded.
            with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
                try:
                    parsed = parse_results_file(data)
                except ResultsInvalid as exc:
                    for error in exc.errors:
                        self.stderr.write(f"{file}: {error}")
                    raise CommandError(
                        f"{file}: not imported ({len(exc.errors)} error(s)); the database is unchanged"
                    ) from None
        try:
            summary = run_import(
                examples=parsed.examples,
                name=name,
                source_file=str(file),
                skip_unknown=skip_unknown,
                length_adjustment=parsed.length_adjustment,
            )
        except RunImportFailed as exc:
            for error in exc.errors:
                self.stderr.write(f"{file}: {error}")
            raise CommandError(f"{file}: not imported; the database is unchanged") from None
        if summary.skipped:
            self.stderr.write(f"{file}: skipped {len(summary.skipped)} unknown prompt_id(s) (--skip-unknown):")
            for line in format_prompt_ids(summary.skipped):
                self.stderr.write(line)
        self.stdout.write(f"{file}: {summary}")
