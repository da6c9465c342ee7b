import argparse

from grading.management.report_command import ReportCommand
from grading.metaeval.report import (
    CSV_COLUMNS,
    DEFAULT_SEED,
    N_RESAMPLES,
    report_csv,
    report_json,
    run_meta_eval_report,
)
from grading.models import Run


class Command(ReportCommand):
    help = "\n".join(
        [
            "Print how far run NAME's grader agrees with physicians on the consensus criteria.",
            "",
            "JSON: 'model' holds the grader's pairwise figures under the reference's metric names",
            "(pairwise_model_<precision|recall|f1>_<pos|neg|balanced>; per category prefixed '<cluster>: '),",
            "each {n, value}; 'physicians' maps every physician-side name to {physician: {n, value}}, a",
            "physician named by anonymized id, or by username when they have a login. Our extras: 'intervals'",
            f"({N_RESAMPLES}-resample bootstrap of the macro F1), 'ranks' (the grader among physicians),",
            "'cohen_kappa' and 'krippendorff_alpha' (chance-corrected agreement, with intervals),",
            "'disagreements' and 'ties' (prompt_id, completion_id, category, grader label, physician",
            "tallies), 'review' (those items by cause), 'grader' (the run's grader and prompt, as the",
            "score report names them), 'coverage' and 'settings'.",
            "",
            "CSV: one row per (scope, grader metric), columns:",
            *(f"  {name:<17} {meaning}" for name, meaning in CSV_COLUMNS),
        ]
    )

    default_seed = DEFAULT_SEED
    seed_help = "bootstrap seed, as the web page uses"

    def create_parser(self, prog_name, subcommand, **kwargs):
        # Keep the column list readable in --help instead of one reflowed paragraph.
        parser = super().create_parser(prog_name, subcommand, **kwargs)
        parser.formatter_class = argparse.RawDescriptionHelpFormatter
        return parser

    def render(self, run: Run, fmt: str, seed: int) -> tuple[str, str]:
        document = run_meta_eval_report(run=run, seed=seed)
        text = report_json(document) if fmt == "json" else report_csv(document)
        return text, f"meta-eval report of run {run.name!r} ({document['coverage']['items']} items)"
