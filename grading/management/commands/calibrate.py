"""calibrate sample|status|report RUN: a run's calibration sample and its physician-calibrated score."""

import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotation.models import Assignment
from annotation.task_kinds.label import KIND as LABEL
from grading.calibration.report import calibration_csv, calibration_report
from grading.calibration.sample import MAX_SIZE, MIN_SIZE, SampleError, calibration_sample_draw
from grading.models import CalibrationSample, Run


class Command(BaseCommand):
    help = (
        "The physician-calibrated score of a finished run. `calibrate sample RUN --n 150 --seed 7 [--by-theme] "
        "[--physicians 1|2]` draws n of its scored responses at random and gives each to physicians to label on "
        "every criterion the run graded; `calibrate status RUN` says how far the labelling is; `calibrate report "
        "RUN [--format json|csv] [--out FILE]` prints the calibrated score (PPI++) with its 95% interval beside "
        "the grader-only and physician-only scores, overall and per theme."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        actions = parser.add_subparsers(dest="action", required=True, metavar="{sample,status,report}")
        sample = actions.add_parser("sample", help="draw the run's calibration sample (once; it is never redrawn)")
        sample.add_argument("name", help="name of a finished run")
        sample.add_argument(
            "--n", type=int, required=True, help=f"responses to sample ({MIN_SIZE}-{MAX_SIZE}; 50-300 is typical)"
        )
        sample.add_argument("--seed", type=int, required=True, help="seed of the random draw, kept with the sample")
        sample.add_argument(
            "--by-theme",
            action="store_true",
            help="stratify by theme, each theme in proportion to its share of the run",
        )
        sample.add_argument(
            "--physicians", type=int, choices=(1, 2), default=1, help="physicians per sampled response (default 1)"
        )
        status = actions.add_parser("status", help="the sample's design and how many responses physicians scored")
        status.add_argument("name", help="name of the run")
        report = actions.add_parser("report", help="the calibrated score, as JSON (default) or CSV")
        report.add_argument("name", help="name of the run")
        report.add_argument("--format", choices=("json", "csv"), default="json", help="output format (default json)")
        report.add_argument("--out", type=Path, help="write to this file instead of standard output")

    def handle(self, *args: Any, action: str, name: str, **options: Any) -> None:
        run = Run.objects.filter(name=name).first()
        if run is None:
            raise CommandError(f"no run named {name!r}")
        if action == "sample":
            try:
                summary = calibration_sample_draw(
                    run=run,
                    size=options["n"],
                    seed=options["seed"],
                    by_theme=options["by_theme"],
                    physicians_per_response=options["physicians"],
                    created_by="command line",
                )
            except SampleError as exc:
                raise CommandError(str(exc)) from None
            self.stdout.write(str(summary))
            return
        data = calibration_report(run)
        if data is None:
            raise CommandError(
                f"{name} has no calibration sample: draw one with `calibrate sample {name} --n N --seed S`"
            )
        if action == "status":
            self._status(run, data)
            return
        text = json.dumps(data, indent=2) + "\n" if options["format"] == "json" else calibration_csv(data)
        out: Path | None = options["out"]
        if out is None:
            self.stdout.write(text, ending="")
            return
        try:
            out.write_text(text)
        except OSError as exc:
            raise CommandError(f"cannot write {out}: {exc.strerror}") from None
        self.stderr.write(f"wrote {out}: calibrated score of run {name!r}")

    def _status(self, run: Run, data: dict[str, Any]) -> None:
        design, progress = data["design"], data["progress"]
        sample = CalibrationSample.objects.get(run=run)
        open_tasks = Assignment.objects.filter(
            kind=LABEL.value,
            status=Assignment.Status.OPEN,
            response_id__in=sample.items.values("response_id"),
        ).count()
        self.stdout.write(
            f"{run.name}: sample of {design['size']} (seed {design['seed']}"
            f"{', by theme' if design['by_theme'] else ''}, {design['physicians_per_response']} physician(s) per "
            f"response); {progress['labelled']} of {progress['sampled']} responses scored by physicians; "
            f"{open_tasks} open labelling tasks"
        )
        overall = data["overall"]
        if overall["interval"]:
            self.stdout.write(
                f"calibrated {overall['estimate']:.4f} [{overall['interval']['low']:.4f}, "
                f"{overall['interval']['high']:.4f}]; grader only {overall['grader_only']:.4f}"
            )
        else:
            self.stdout.write(f"no interval yet: {overall['no_interval_reason']}")
