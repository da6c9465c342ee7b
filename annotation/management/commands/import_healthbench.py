from pathlib import Path
from typing import Any, BinaryIO

from django.core.management.base import CommandParser

from annotation.formats.importer import ImportSummary, import_healthbench_lines
from annotation.formats.validation import file_lines
from annotation.management.import_command import ImportCommand


class Command(ImportCommand):
    help = (
        "Import a HealthBench eval JSONL file (the main, Hard or Consensus file). Rows are merged by "
        "prompt_id, so importing all three files gives each conversation once, with every criterion once. "
        "Every conversation joins the subset 'all'. The whole file is imported in one transaction: on any "
        "error nothing is written and each bad line is listed with its field."
    )
    file_help = "path to the .jsonl file"

    def add_options(self, parser: CommandParser) -> None:
        parser.add_argument("--subset", help="also add every conversation to this subset (e.g. hard, consensus)")

    def import_file(self, file: Path, handle: BinaryIO, options: dict[str, Any]) -> ImportSummary:
        return import_healthbench_lines(file_lines(handle), subset_name=options["subset"])
