"""Grading under a provider's rate limit: a real Celery worker against the test LLM server
enforcing an RPM limit as OpenAI does (tests/llm_server.py, ``rpm=``: a bucket of
``--window`` seconds' worth, 429 ``rate_limit_exceeded`` with x-ratelimit-* headers and, in
the "retry-after" variant, retry-after-ms and retry-after; in the "headers only" variant only
the x-ratelimit-* headers say when to come back), beside the baseline's code (--baseline-ref,
main by default, checked out by the bench into a temporary directory and run by a worker of
its own) in the same run.

The endpoint has no limits of its own (as a curator who does not know them leaves it), and
far more calls in flight than the provider allows (--concurrency / latency against
--rpm / 60): the provider's 429s and headers are all the run has to go by.

Figures per run: grades per second against the provider's allowed rate (target, issue 29:
>= 80%), the requests the server refused (429s) and accepted, failed grades, wall time, the
worker's CPU seconds and the load average.

Usage: REDIS_URL=redis://127.0.0.1:6379/0 .venv/bin/python bench/rate_limit_bench.py [--grades 900]
       [--rpm 1200] [--window 1] [--concurrency 64] [--latency 0.2] [--baseline-ref main]
"""

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("ENDPOINT_ALLOW_PRIVATE_NETWORKS", "1")
os.environ.setdefault("CELERY_QUEUE_PREFIX", f"bench-rate-limit-{os.getpid()}")

from bench import grading_bench
from bench._db import REPO, fresh_postgres


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--grades", type=int, default=900)
    parser.add_argument("--rpm", type=int, default=1200, help="the provider's requests per minute")
    parser.add_argument("--window", type=float, default=1.0, help="seconds' worth the provider's bucket holds")
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--worker-processes", type=int, default=4)
    parser.add_argument("--baseline-ref", default="main")
    parser.add_argument("--database", default="healthbench_bench_rate_limit")
    args = parser.parse_args()
    if not os.environ.get("REDIS_URL"):
        print("note: REDIS_URL is not set: the worker's processes share no limiter")

    fresh_postgres(args.database)
    from tests.llm_server import LLMServer

    source = grading_bench.build_source(args.grades)
    tree = grading_bench.baseline_tree(args.baseline_ref) if args.baseline_ref else None
    allowed = args.rpm / 60
    print(
        f"{args.grades:,} grades; the provider allows {args.rpm:,} requests a minute ({allowed:.1f}/s, a bucket of "
        f"{args.window:g} s); {args.concurrency} calls in flight at {args.latency * 1000:.0f} ms could make "
        f"{args.concurrency / args.latency:.0f}/s; {os.cpu_count()} cores; baseline: {args.baseline_ref or 'none'}"
    )
    header = ("grades/s", "of allowed", "429s", "accepted", "failed", "time s", "CPU s", "load")
    print(f"{'':44} " + " ".join(f"{h:>10}" for h in header))
    sides = [("this branch", REPO)] + ([(f"baseline {args.baseline_ref}", tree)] if tree else [])
    shares: dict[tuple[str, str], float] = {}
    for variant, retry_after in (("retry-after", True), ("headers only", False)):
        for side, repo in sides:
            server = LLMServer(
                latency=args.latency, rpm=args.rpm, rate_window=args.window, send_retry_after=retry_after
            ).start()
            try:
                figures = grading_bench.run_pipeline(
                    server, source, args, "chat", repo=repo, concurrency=args.concurrency, strict=False
                )
            finally:
                server.stop()
            refused = sum(1 for _, status in server.arrivals if status == 429)
            accepted = len(server.arrivals) - refused
            rate = figures["grades"] / figures["elapsed"]
            shares[(variant, side)] = rate / allowed
            print(
                f"{side + ': ' + variant:44} {rate:10.1f} {rate / allowed:10.1%} {refused:10,} {accepted:10,} "
                f"{figures['failed']:10,} {figures['elapsed']:10.1f} {figures['cpu']:10.1f} {figures['load']:10.1f}",
                flush=True,
            )
    for (variant, side), share in shares.items():
        if side == "this branch":
            verdict = "met" if share >= 0.8 else "MISSED"
            base = shares.get((variant, sides[-1][0])) if len(sides) > 1 else None
            versus = f"; the baseline {base:.1%}" if base is not None else ""
            print(f"{variant}: {share:.1%} of the allowed rate (target >= 80%: {verdict}){versus}")


if __name__ == "__main__":
    main()
