from pathlib import Path
from typing import Any, BinaryIO

from django.core.management.base import CommandParser

from annotation.formats.validation import file_lines
from annotation.management.import_command import ImportCommand
from grading.metaeval.grader_labels import GraderLabelsSummary, grader_labels_import


class Command(ImportCommand):
    help = (
        "Import a grader's labels on meta-eval items into a run named NAME (status imported). Each JSONL row "
        "is {prompt_id, completion_id, category, criteria_met, explanation}: criteria_met must be true or "
        "false, explanation is optional, and the item must be stored already (run import_meta_eval first). "
        "The file is imported in one transaction: on any error nothing is written and each bad line is listed "
        "with its field. Importing the same labels into the same run again changes nothing; other labels "
        "into an existing run are refused."
    )
    file_help = "path to the grader-label .jsonl file"

    def add_options(self, parser: CommandParser) -> None:
        parser.add_argument("--name", required=True, help="name of the run that receives the grades")

    def import_file(self, file: Path, handle: BinaryIO, options: dict[str, Any]) -> GraderLabelsSummary:
        return grader_labels_import(lines=file_lines(handle), run_name=options["name"], source_file=str(file))
