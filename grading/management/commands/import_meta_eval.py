from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from annotation.formats.importer import ImportFailed
from annotation.formats.validation import file_lines
from grading.metaeval.importer import META_EVAL_SUBSET, meta_eval_import


class Command(BaseCommand):
    help = (
        "Import a HealthBench meta-eval JSONL file (prompt, completion, rubric, category, binary_labels, "
        "anonymized_physician_ids, completion_id, prompt_id, canary): conversations are matched by prompt_id "
        f"(new ones join the subset '{META_EVAL_SUBSET}'), responses by completion_id, the category's consensus "
        "criterion is attached to the conversation, and each anonymized physician's label is stored. "
        "The whole file is imported in one transaction: on any error nothing is written and each bad line "
        "is listed with its field. Importing the same file again changes nothing."
    )

    def add_arguments(self, parser):
        parser.add_argument("file", type=Path, help="path to the meta-eval .jsonl file")

    def handle(self, *args, file: Path, **options):
        try:
            handle = file.open("rb")
        except OSError as exc:
            raise CommandError(f"cannot read {file}: {exc.strerror}") from None
        try:
            with handle:
                summary = meta_eval_import(lines=file_lines(handle))
        except ImportFailed as exc:
            for error in exc.errors:
                self.stderr.write(f"{file}: {error}")
            raise CommandError(
                f"{file}: not imported ({len(exc.errors)} error(s)); the database is unchanged"
            ) from None
        for warning in summary.warnings:
            self.stderr.write(f"{file}: warning: {warning}")
        self.stdout.write(f"{file}: {summary}")
