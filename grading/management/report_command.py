"""The one shape of the report commands (run_report, meta_eval): a run named NAME, a format
(json or csv), an optional --out file, a bootstrap --seed; the document goes to standard output,
or to the file with a line on standard error saying what was written."""

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from grading.models import Run


class ReportCommand(BaseCommand):
    default_seed = 0
    seed_help = "seed of the bootstrap resamples, so a report can be reproduced"

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name", help="name of the run")
        parser.add_argument("--format", choices=["json", "csv"], default="json", help="output format (default json)")
        parser.add_argument("--out", type=Path, help="write to this file instead of standard output")
        parser.add_argument(
            "--seed", type=int, default=self.default_seed, help=f"{self.seed_help} (default {self.default_seed})"
        )

    def render(self, run: Run, fmt: str, seed: int) -> tuple[str, str]:
        """The document's text, and what the line on standard error calls it."""
        raise NotImplementedError

    def handle(self, *args: Any, name: str, format: str, out: Path | None, seed: int, **options: Any) -> None:
        if seed < 0:
            raise CommandError("--seed must be 0 or more")
        run = Run.objects.filter(name=name).first()
        if run is None:
            raise CommandError(f"no run named {name!r}")
        text, described = self.render(run, format, seed)
        if out is None:
            self.stdout.write(text, ending="")
            return
        try:
            out.write_text(text)
        except OSError as exc:
            raise CommandError(f"cannot write {out}: {exc.strerror}") from None
        self.stderr.write(f"wrote {out}: {described}")
