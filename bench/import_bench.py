"""Import a HealthBench-size file into PostgreSQL, beside the time to merely parse it with json.

Target (issue: foundation): import within 30 s and within 10x the parse time.
Usage: .venv/bin/python bench/import_bench.py [--conversations 5000]
"""

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._db import fresh_postgres
from bench.generate import healthbench_lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--conversations", type=int, default=5000)
    parser.add_argument("--database", default="healthbench_bench_import")
    args = parser.parse_args()

    lines = healthbench_lines(args.conversations)
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as handle:
        handle.write("\n".join(lines) + "\n")
        path = Path(handle.name)
    rows = [json.loads(x) for x in lines]
    n_criteria = [len(r["rubrics"]) for r in rows]
    print(
        f"file: {args.conversations} conversations, {sum(n_criteria)} criteria (median "
        f"{statistics.median(n_criteria):.0f}), "
        f"{path.stat().st_size / 1e6:.1f} MB"
    )

    # Baseline: read and parse every line with json, nothing else.
    start = time.perf_counter()
    with path.open("rb") as f:
        parsed = [json.loads(raw) for raw in f]
    parse_seconds = time.perf_counter() - start
    assert len(parsed) == args.conversations

    fresh_postgres(args.database)
    from annotation.formats.importer import import_healthbench_lines
    from annotation.models import Conversation, Criterion

    start = time.perf_counter()
    with path.open("rb") as f:
        summary = import_healthbench_lines(f, subset_name="bench")
    import_seconds = time.perf_counter() - start
    assert Conversation.objects.count() == args.conversations
    assert Criterion.objects.count() == sum(n_criteria)

    start = time.perf_counter()
    with path.open("rb") as f:
        again = import_healthbench_lines(f, subset_name="bench")
    reimport_seconds = time.perf_counter() - start
    assert again.criteria_created == 0
    assert again.conversations_created == 0

    path.unlink()
    print(summary)
    print(f"baseline  json parse only        {parse_seconds:8.2f} s")
    print(
        f"import    into PostgreSQL         {import_seconds:8.2f} s   ratio "
        f"{import_seconds / parse_seconds:5.1f}x parse (target <= 10x, <= 30 s)"
    )
    print(
        f"re-import (merge, no change)      {reimport_seconds:8.2f} s   ratio "
        f"{reimport_seconds / parse_seconds:5.1f}x parse"
    )
    ok = import_seconds <= 30 and import_seconds <= 10 * parse_seconds
    print("target met" if ok else "TARGET MISSED")


if __name__ == "__main__":
    main()
