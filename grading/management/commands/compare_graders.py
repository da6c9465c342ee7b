"""compare_graders RUN_A RUN_B ...: agreement with physicians and cost of several graders on
the same physician-labelled items, side by side (grading.metaeval.compare)."""

import json

from django.core.management.base import BaseCommand, CommandError, CommandParser

from grading.metaeval.compare import DEFAULT_SEED, ComparisonError, graders_compare
from grading.models import Run


class Command(BaseCommand):
    help = (
        "Compare runs that graded the same physician-labelled items (e.g. the meta-eval set) with different "
        "endpoints or grading modes: macro F1 against physicians per consensus criterion and overall with "
        "95% bootstrap intervals, Cohen's kappa, the paired bootstrap difference in macro F1 against the "
        "first run, and calls, input/cached/output tokens, dollars and wall time."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("runs", nargs="+", metavar="RUN", help="run names; the first is the baseline")
        parser.add_argument("--format", choices=["text", "json"], default="text")
        parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help="bootstrap seed, as the web page uses")
        parser.add_argument("--out", help="write to this file instead of the terminal")

    def handle(self, *args, **options) -> None:
        runs = []
        for name in options["runs"]:
            try:
                runs.append(Run.objects.select_related("grader_config").get(name=name))
            except Run.DoesNotExist:
                raise CommandError(f"no run named {name!r}") from None
        try:
            document = graders_compare(runs=runs, seed=options["seed"])
        except ComparisonError as exc:
            raise CommandError(str(exc)) from None
        text = json.dumps(document, indent=2) + "\n" if options["format"] == "json" else comparison_text(document)
        if options["out"]:
            with open(options["out"], "w", encoding="utf-8") as out:
                out.write(text)
            self.stdout.write(f"Wrote the comparison of {len(runs)} runs to {options['out']}.")
        else:
            self.stdout.write(text, ending="")


def _number(value, digits: int = 3) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def comparison_text(document: dict) -> str:
    lines = [f"{document['items']:,} physician-labelled items, {document['physician_labels']:,} labels"]
    for run in document["runs"]:
        f1, usage = run["macro_f1"]["overall"], run["usage"]
        kappa = run["kappa"] or {}
        how = f"{run['endpoint']} {run['mode']}{' ' + run['explanation_length'] if run['explanation_length'] else ''}"
        line = (
            f"{run['name']} ({how.strip()}): macro F1 {_number(f1['value'])} [{_number(f1['low'])}, "
            f"{_number(f1['high'])}], kappa {_number(kappa.get('value'))}"
        )
        difference = (run.get("f1_difference_vs_first") or {}).get("overall")
        if difference:
            line += (
                f", vs the first {_number(difference['value'], 3)} [{_number(difference['low'])}, "
                f"{_number(difference['high'])}]"
            )
        seconds = usage["seconds"]
        line += (
            f"; {usage['calls']:,} calls, {usage['input_tokens']:,} input ({usage['cached_tokens']:,} cached), "
            f"{usage['output_tokens']:,} output tokens, "
            f"{'$' + usage['cost_usd'] if usage['cost_usd'] else 'cost unknown'}, "
            f"{'—' if seconds is None else f'{seconds:,.0f} s'}"
        )
        lines.append(line)
    return "\n".join(lines) + "\n"
