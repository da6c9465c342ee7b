"""The physician-calibrated score in simulation: coverage and width against a known truth.

Each replication is a synthetic run of 5,000 responses. Physician scores come from a known
process (Beta(2, 2.5) on [0, 1], mean 2/4.5); the grader's score is a biased, noisy copy
(bias -0.10..+0.10, noise set for a correlation of 0.3..0.95 before clipping to [0, 1]). A
uniform random sample of n responses gets the physicians' scores, and
``grading.calibration.ppi.calibrate`` gives the calibrated 95% interval.

Printed per setting, with the baselines beside it in the same run:
- coverage of the calibrated interval (target: within [0.935, 0.965] everywhere);
- its width over the physician-only interval's width at the same n (target: <= 0.7 at
  correlation 0.8, never above 1.05);
- the grader-only interval's coverage, which shows what ignoring the grader's bias costs;
- the same coverage with the normal quantile instead of t(n - 2), the choice the module makes.

Usage: .venv/bin/python bench/calibration_bench.py [--replications 2000] [--run-size 5000] [--seed 31]
"""

import argparse
import os
import sys
import time
from pathlib import Path
from statistics import NormalDist

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from grading.calibration.ppi import calibrate

ALPHA, BETA = 2.0, 2.5
TRUTH = ALPHA / (ALPHA + BETA)
BIASES = (-0.10, 0.0, 0.10)
CORRELATIONS = (0.3, 0.5, 0.8, 0.95)
SAMPLE_SIZES = (50, 150, 300)
Z = NormalDist().inv_cdf(0.975)


def _grader(physician: np.ndarray, bias: float, correlation: float, rng: np.random.Generator) -> np.ndarray:
    spread = physician.std()
    noise = spread * np.sqrt(1 / correlation**2 - 1)
    return np.clip(physician + bias + rng.normal(0.0, noise, physician.shape), 0.0, 1.0)


def _setting(bias: float, correlation: float, n: int, args: argparse.Namespace, rng: np.random.Generator) -> dict:
    covered = covered_z = grader_covered = 0
    width_ratio, correlations = [], []
    for _ in range(args.replications):
        physician = rng.beta(ALPHA, BETA, args.run_size)
        grader = _grader(physician, bias, correlation, rng)
        sample = rng.choice(args.run_size, n, replace=False)
        result = calibrate(physician[sample], grader[sample], grader)
        assert result.interval
        assert result.physician_only_interval
        assert result.grader_only_interval
        covered += result.interval.low <= TRUTH <= result.interval.high
        covered_z += abs(result.estimate - TRUTH) <= Z * result.se  # type: ignore[operator]
        grader_covered += result.grader_only_interval.low <= TRUTH <= result.grader_only_interval.high
        own = result.physician_only_interval.high - result.physician_only_interval.low
        width_ratio.append((result.interval.high - result.interval.low) / own)
        correlations.append(np.corrcoef(physician, grader)[0, 1])
    reps = args.replications
    return {
        "coverage": covered / reps,
        "coverage_z": covered_z / reps,
        "grader_coverage": grader_covered / reps,
        "width_ratio": float(np.mean(width_ratio)),
        "correlation": float(np.mean(correlations)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--replications", type=int, default=2000)
    parser.add_argument("--run-size", type=int, default=5000)
    parser.add_argument("--seed", type=int, default=31)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    wall, cpu = time.perf_counter(), time.process_time()
    print(f"{args.replications} replications of a {args.run_size}-response run per setting; truth {TRUTH:.4f}")
    print(" bias  corr(nominal/seen)    n  coverage  [normal q]  width/physician-only  grader-only coverage")
    worst_coverage, worst_ratio, ratio_at_08 = [], 0.0, 0.0
    for correlation in CORRELATIONS:
        for bias in BIASES:
            for n in SAMPLE_SIZES:
                row = _setting(bias, correlation, n, args, rng)
                worst_coverage.append(row["coverage"])
                worst_ratio = max(worst_ratio, row["width_ratio"])
                if correlation == 0.8:
                    ratio_at_08 = max(ratio_at_08, row["width_ratio"])
                print(
                    f"{bias:+.2f}  {correlation:.2f}/{row['correlation']:.2f}"
                    f"          {n:4d}  {row['coverage']:.4f}    [{row['coverage_z']:.4f}]"
                    f"    {row['width_ratio']:.3f}                 {row['grader_coverage']:.4f}"
                )
    ok_coverage = all(0.935 <= c <= 0.965 for c in worst_coverage)
    print(
        f"coverage range {min(worst_coverage):.4f}..{max(worst_coverage):.4f} (target within 0.935..0.965: "
        f"{'met' if ok_coverage else 'NOT met'}); width ratio at corr 0.8 at most {ratio_at_08:.3f} "
        f"(target <= 0.7: {'met' if ratio_at_08 <= 0.7 else 'NOT met'}); largest width ratio {worst_ratio:.3f} "
        f"(target <= 1.05: {'met' if worst_ratio <= 1.05 else 'NOT met'})"
    )
    print(
        f"wall {time.perf_counter() - wall:.1f} s, CPU {time.process_time() - cpu:.1f} s, "
        f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )


if __name__ == "__main__":
    main()
