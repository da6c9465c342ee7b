import mmap
import os
from pathlib import Path
from typing import Any, BinaryIO

from django.core.management.base import CommandParser

from annotation.formats.validation import NO_ROWS
from annotation.management.import_command import ImportCommand
from grading.reports.results_file import parse_results_file
from grading.reports.run_import import RunImportSummary, format_prompt_ids, run_import


class Command(ImportCommand):
    help = (
        "Import the results file simple-evals writes for a HealthBench run (*_allresults.json) as a run "
        "named NAME: one response per example (repeated prompt_ids are further samples) and one grade per "
        "graded rubric item; criteria_met null is a grade that failed. Conversations are found by prompt_id, "
        "so import the dataset with import_healthbench first. The file is imported in one transaction: on "
        "any error nothing is written and each bad example is listed with its field."
    )
    file_help = "path to the *_allresults.json file"

    def add_options(self, parser: CommandParser) -> None:
        parser.add_argument("--name", required=True, help="name of the new run (must not exist yet)")
        parser.add_argument(
            "--skip-unknown",
            action="store_true",
            help="leave out examples whose prompt_id is not in the database (listed) instead of failing",
        )

    def import_file(self, file: Path, handle: BinaryIO, options: dict[str, Any]) -> RunImportSummary:
        if os.fstat(handle.fileno()).st_size == 0:
            raise ValueError(NO_ROWS)
        # Mapped, not read: a paper-size file is gigabytes and only its examples are decoded.
        with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
            parsed = parse_results_file(data)
        return run_import(
            examples=parsed.examples,
            name=options["name"],
            source_file=str(file),
            skip_unknown=options["skip_unknown"],
            length_adjustment=parsed.length_adjustment,
        )

    def report(self, file: Path, summary: RunImportSummary) -> None:
        if summary.skipped:
            self.stderr.write(f"{file}: skipped {len(summary.skipped)} unknown prompt_id(s) (--skip-unknown):")
            for line in format_prompt_ids(summary.skipped):
                self.stderr.write(line)
        super().report(file, summary)
