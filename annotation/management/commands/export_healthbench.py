import sys
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from annotation.formats.exporter import export_subset_lines
from annotation.models import Subset, SubsetVersion
from annotation.services.subset_versions import export_version_lines


class Command(BaseCommand):
    help = (
        "Write a subset in the HealthBench eval JSONL format, one conversation per line in the order "
        "they joined the subset. The 'consensus' subset is written with its cluster criteria only."
    )

    def add_arguments(self, parser):
        parser.add_argument("--subset", required=True, help="subset name, e.g. all, hard, consensus")
        parser.add_argument(
            "--frozen", type=int, metavar="N", help="export frozen version N (default: the subset as it is now)"
        )
        parser.add_argument("--out", type=Path, help="output file (default: standard output)")

    def handle(self, *args, subset: str, out: Path | None, frozen: int | None = None, **options):
        try:
            chosen = Subset.objects.get(name=subset)
        except Subset.DoesNotExist:
            names = ", ".join(Subset.objects.values_list("name", flat=True)) or "none yet"
            raise CommandError(f"no subset named {subset!r} (subsets: {names})") from None
        if frozen is None:
            lines = export_subset_lines(chosen)
        else:
            try:
                lines = export_version_lines(chosen.versions.get(number=frozen))
            except SubsetVersion.DoesNotExist:
                numbers = (
                    ", ".join(str(n) for n in chosen.versions.values_list("number", flat=True)) or "none frozen yet"
                )
                raise CommandError(f"subset {subset!r} has no version {frozen} (versions: {numbers})") from None
        count = 0
        if out is None:
            for line in lines:
                sys.stdout.write(line + "\n")
                count += 1
        else:
            # Write to a temporary name first so a failed export never leaves half a file.
            partial = out.with_name(out.name + ".partial")
            try:
                with partial.open("w", encoding="utf-8") as handle:
                    for line in lines:
                        handle.write(line + "\n")
                        count += 1
                partial.replace(out)
            except OSError as exc:
                raise CommandError(f"cannot write {out}: {exc.strerror}") from None
            self.stderr.write(f"wrote {count} conversations of subset {subset!r} to {out}")
