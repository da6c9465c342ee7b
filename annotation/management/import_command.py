"""The one shape of every import command (import_healthbench, import_meta_eval, import_run,
import_grader_labels): open the file, import it in one transaction, and on refusal list each bad
line with its field, then stop with a non-zero exit saying the database is unchanged.

A subclass says what the file is (`file_help`), adds its options (`add_options`) and imports
(`import_file`); a refusal is a FileRefused (one message per bad line) or a ValueError (one
message for the whole file). The summary's warnings and its text are printed alike.
"""

from pathlib import Path
from typing import Any, BinaryIO

from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotation.formats.validation import FileRefused


class ImportCommand(BaseCommand):
    file_help = "path to the file"

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", type=Path, help=self.file_help)
        self.add_options(parser)

    def add_options(self, parser: CommandParser) -> None:
        """The command's own options, after the file."""

    def import_file(self, file: Path, handle: BinaryIO, options: dict[str, Any]) -> Any:
        """Import the open file (`options`: the command's options); returns a summary whose str()
        is the closing line."""
        raise NotImplementedError

    def report(self, file: Path, summary: Any) -> None:
        for warning in getattr(summary, "warnings", []):
            self.stderr.write(f"{file}: warning: {warning}")
        self.stdout.write(f"{file}: {summary}")

    def handle(self, *args: Any, file: Path, **options: Any) -> None:
        try:
            handle = file.open("rb")
        except OSError as exc:
            raise CommandError(f"cannot read {file}: {exc.strerror}") from None
        try:
            with handle:
                summary = self.import_file(file, handle, options)
        except FileRefused as exc:
            for error in exc.errors:
                self.stderr.write(f"{file}: {error}")
            raise CommandError(
                f"{file}: not imported ({len(exc.errors)} error(s)); the database is unchanged"
            ) from None
        except ValueError as exc:
            raise CommandError(f"{file}: {exc}; the database is unchanged") from None
        self.report(file, summary)
