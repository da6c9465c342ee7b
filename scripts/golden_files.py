"""Recompute the reference outputs that the golden files under tests/fixtures/ keep, with
simple-evals' own code, from the inputs each file stores.

    SIMPLE_EVALS_DIR=../shared/reference/simple-evals-ee3b031 .venv/bin/python scripts/golden_files.py --check
    SIMPLE_EVALS_DIR=... .venv/bin/python scripts/golden_files.py --write scoring/mixed

--check lists what differs and exits 1 when a file is not what the reference computes; --write
rewrites the files (their inputs unchanged). Without NAME, every file. A file built from the
public HealthBench samples is skipped, with a note, when they are not in --samples. What is
recomputed and how: tests/reference_outputs.py; tests/test_golden_files.py runs the check.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.reference_outputs import GOLDEN_FILES, SAMPLES, SamplesUnavailable, differences, recomputed_text  # noqa: E402
from tests.simple_evals import ReferenceUnavailable, load_reference  # noqa: E402


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Recompute the golden files' reference outputs with simple-evals' own functions.",
        epilog="Files: " + ", ".join(GOLDEN_FILES),
    )
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--check", action="store_true", help="say which files differ from the reference's output")
    action.add_argument("--write", action="store_true", help="rewrite the files with the reference's output")
    parser.add_argument("names", nargs="*", metavar="NAME", help="a file, e.g. scoring/mixed (default: all)")
    parser.add_argument(
        "--simple-evals",
        type=Path,
        default=os.environ.get("SIMPLE_EVALS_DIR"),
        help="the simple-evals checkout (default: $SIMPLE_EVALS_DIR)",
    )
    parser.add_argument(
        "--samples", type=Path, default=SAMPLES, help=f"the public HealthBench samples (default: {SAMPLES})"
    )
    arguments = parser.parse_args()
    unknown = [name for name in arguments.names if name not in GOLDEN_FILES]
    if unknown:
        parser.error(f"no golden file {', '.join(unknown)}; there are {', '.join(GOLDEN_FILES)}")
    if arguments.simple_evals is None:
        parser.error("no simple-evals checkout: set SIMPLE_EVALS_DIR or pass --simple-evals")
    return arguments


def main() -> int:
    arguments = _arguments()
    try:
        modules = load_reference(arguments.simple_evals)
    except ReferenceUnavailable as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    failed = False
    for name in arguments.names or GOLDEN_FILES:
        golden = GOLDEN_FILES[name]
        try:
            if arguments.write:
                text = recomputed_text(golden, modules, arguments.samples)
                changed = text != golden.path.read_text()
                golden.path.write_text(text)
                print(f"{name}: {'rewritten' if changed else 'unchanged'}")
                continue
            found = differences(golden, modules, arguments.samples)
        except SamplesUnavailable as exc:
            print(f"{name}: skipped, {exc}")
            continue
        failed = failed or bool(found)
        print(f"{name}: {'differs from the reference' if found else 'the reference output'}")
        for line in found:
            print(f"    {line}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
