from django.core.management.base import BaseCommand, CommandError

from annotation.services.subset_builders import consensus_subset_build
from grading.models import Run
from grading.reports.hard_subset import hard_subset_build


class Command(BaseCommand):
    help = (
        "Rebuild a curated subset. 'consensus': the conversations with at least one positive-points "
        "consensus criterion attached. 'hard': the N conversations with the lowest mean score across "
        "the named grading runs. Members that stay keep their place; freeze the subset afterwards "
        "(freeze_subset) to record a version."
    )

    def add_arguments(self, parser):
        parser.add_argument("kind", choices=["consensus", "hard"])
        parser.add_argument("--runs", nargs="+", default=[], metavar="RUN", help="run names (hard only)")
        parser.add_argument("--n", type=int, default=1000, help="how many conversations (hard only; default 1000)")
        parser.add_argument("--name", help="subset name (default: the kind)")

    def handle(self, *args, kind: str, runs: list[str], n: int, name: str | None, **options):
        if kind == "consensus":
            subset, added, removed = consensus_subset_build(name=name or "consensus")
        else:
            if not runs:
                raise CommandError("hard needs --runs: the grading runs whose scores decide difficulty")
            if n < 1:
                raise CommandError("--n must be at least 1")
            found = {r.name: r for r in Run.objects.filter(name__in=runs)}
            unknown = [r for r in runs if r not in found]
            if unknown:
                raise CommandError(f"no run named {', '.join(map(repr, unknown))}")
            subset, added, removed = hard_subset_build(runs=[found[r] for r in runs], n=n, name=name or "hard")
        total = subset.members.count()
        self.stdout.write(f"{subset.name}: {total} conversations ({added} added, {removed} removed)")
