from django.core.management.base import BaseCommand, CommandError

from annotation.models import Subset
from annotation.services.subset_versions import SubsetEmpty, subset_version_freeze


class Command(BaseCommand):
    help = (
        "Freeze a subset: record its members and their rubrics as they are now, with a content hash. "
        "A frozen version never changes; runs name the version they graded. Freezing an unchanged "
        "subset again reports its latest version."
    )

    def add_arguments(self, parser):
        parser.add_argument("subset", help="subset name, e.g. consensus, hard")

    def handle(self, *args, subset: str, **options):
        try:
            chosen = Subset.objects.get(name=subset)
        except Subset.DoesNotExist:
            raise CommandError(f"no subset named {subset!r}") from None
        try:
            version, created = subset_version_freeze(subset=chosen)
        except SubsetEmpty as exc:
            raise CommandError(str(exc)) from None
        state = "frozen as" if created else "unchanged since"
        self.stdout.write(
            f"{subset}: {state} version {version.number} ({len(version.snapshot)} conversations, sha256 "
            f"{version.content_hash})"
        )
