from typing import Any

from django.core.management.base import BaseCommand, CommandError

from annotation.selectors.stored_text import stored_text_problems
from annotation.services.stored_text import stored_text_repair


class Command(BaseCommand):
    help = (
        "Report stored text that today's importers would refuse: a lone surrogate or NUL (in JSON or text "
        "columns), bytes that are not UTF-8, or a value longer than its column (SQLite does not enforce "
        "lengths). Pages already show such text with U+FFFD in place of the bad characters. With --repair, "
        "rewrite the rows that way for good (over-long values are cut to fit, except unique ones, which are "
        "left to rename by hand). Exits non-zero while problems remain."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--repair", action="store_true", help="rewrite the bad values (in one transaction)")

    def handle(self, *args: Any, repair: bool, **options: Any) -> None:
        problems = stored_text_problems()
        for problem in problems:
            self.stdout.write(str(problem))
        if not problems:
            self.stdout.write("No stored text breaks the file rules.")
            return
        if not repair:
            raise CommandError(f"{len(problems)} problem(s) found; run with --repair to rewrite them")
        repaired = stored_text_repair(problems=problems)
        left = len(problems) - repaired
        self.stdout.write(f"Repaired {repaired} value(s).")
        if left:
            raise CommandError(f"{left} value(s) need a person: see the lines marked 'rename it by hand'")
