from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from annotation.formats.importer import ImportFailed
from annotation.formats.validation import file_lines
from grading.metaeval.grader_labels import grader_labels_import


class Command(BaseCommand):
    help = (
        "Import a grader's labels on meta-eval items into a run named NAME (status imported). Each JSONL row "
        "is {prompt_id, completion_id, category, criteria_met, explanation}: criteria_met must be true or "
        "false, explanation is optional, and the item must be stored already (run import_meta_eval first). "
        "The file is imported in one transaction: on any error nothing is written and each bad line is listed "
        "with its field. Importing the same labels into the same run again changes nothing; other labels "
        "into an existing run are refused."
    )

    def add_arguments(self, parser):
        parser.add_argument("file", type=Path, help="path to the grader-label .jsonl file")
        parser.add_argument("--name", required=True, help="name of the run that receives the grades")

    def handle(self, *args, file: Path, name: str, **options):
        try:
            handle = file.open("rb")
        except OSError as exc:
            raise CommandError(f"cannot read {file}: {exc.strerror}") from None
        try:
            with handle:
                summary = grader_labels_import(lines=file_lines(handle), run_name=name, source_file=str(file))
        except ImportFailed as exc:
            for error in exc.errors:
                self.stderr.write(f"{file}: {error}")
            raise CommandError(
                f"{file}: not imported ({len(exc.errors)} error(s)); the database is unchanged"
            ) from None
        except ValueError as exc:
            raise CommandError(f"{file}: {exc}; the database is unchanged") from None
        self.stdout.write(f"{file}: {summary}")
