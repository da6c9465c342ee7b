import json

from grading.calibration.report import with_calibration
from grading.management.report_command import ReportCommand
from grading.models import Run
from grading.reports.report import DEFAULT_SEED, grading_record, report_csv, responses_record, run_report


class Command(ReportCommand):
    help = (
        "Score report of the run NAME. JSON (default): one object {score, metrics, worst_at_k, "
        "consensus_error_rates, length_score_correlation, counts, reused}; metrics use simple-evals' names "
        "(overall_score, theme:..., axis:..., cluster:..., each with :n_samples and :bootstrap_std). "
        "CSV: a header 'name,value,n_samples,bootstrap_std', then one row per metric: score first, then "
        "every metric by name. Responses with a failed or missing grade are left out of every score and "
        "counted under counts."
    )
    default_seed = DEFAULT_SEED

    def render(self, run: Run, fmt: str, seed: int) -> tuple[str, str]:
        data = with_calibration(
            run,
            {
                **run_report(run=run, seed=seed).data,
                "grading": grading_record(run),
                "responses": responses_record(run),
            },
        )
        text = json.dumps(data, indent=2) + "\n" if fmt == "json" else report_csv(data)
        return text, f"score report of run {run.name!r}"
