from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from annotation.formats.importer import ImportFailed, import_healthbench_lines
from annotation.formats.validation import file_lines


class Command(BaseCommand):
    help = (
        "Import a HealthBench eval JSONL file (the main, Hard or Consensus file). Rows are merged by "
        "prompt_id, so importing all three files gives each conversation once, with every criterion once. "
        "Every conversation joins the subset 'all'. The whole file is imported in one transaction: on any "
        "error nothing is written and each bad line is listed with its field."
    )

    def add_arguments(self, parser):
        parser.add_argument("file", type=Path, help="path to the .jsonl file")
        parser.add_argument("--subset", help="also add every conversation to this subset (e.g. hard, consensus)")

    def handle(self, *args, file: Path, subset: str | None, **options):
        try:
            handle = file.open("rb")
        except OSError as exc:
            raise CommandError(f"cannot read {file}: {exc.strerror}") from None
        try:
            with handle:
                summary = import_healthbench_lines(file_lines(handle), subset_name=subset)
        except ImportFailed as exc:
            for error in exc.errors:
                self.stderr.write(f"{file}: {error}")
            raise CommandError(
                f"{file}: not imported ({len(exc.errors)} error(s)); the database is unchanged"
            ) from None
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        for warning in summary.warnings:
            self.stderr.write(f"{file}: warning: {warning}")
        self.stdout.write(f"{file}: {summary}")
