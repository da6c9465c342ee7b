"""What the provider's Batch API saves: each grading mode graded live (the baseline) and
batched, on the same responses, against the test LLM server (tests/llm_server.py and its
Files and Batch API), in the same run; figures scaled to a paper-size run.

The data: --conversations conversations of paper-like size (HealthBench: 5,000 conversations,
~11.4 criteria each; about 1,067 prompt tokens per per-criterion call), one response each.
Each (mode, live or batched) run grades them in this process through the product's own
batch service (grading.pipeline.batches.batch_run, the code a worker runs), on a fresh test
server of its own (so that no run finds another's prefixes in the server's prompt cache).
Calls, input, cached and output tokens are what the server billed; dollars are the run's
own cost (grading.pipeline.progress) at GPT-4.1 prices ($2.00 input, $0.50 cached input,
$8.00 output per million tokens) and, batched, OpenAI's Batch API discount of 50%. The
paper-size figures scale them by 5,000 / --conversations; beside them is the estimate the
product shows before launch for the same run (grading.pipeline.estimate), also scaled.

The least wall time of a live run under a limit of 2,000,000 tokens per minute is its tokens
/ 2 M minutes; a batched run's is the provider's to choose, within its 24-hour window.

Targets: batched <= 1/2 of the same mode's live cost; per-response + batch <= $20 for a
paper-size run.

Usage: .venv/bin/python bench/batch_bench.py [--conversations 400] [--modes per-criterion,per-response]
"""

import argparse
import os
import random
import sys
import time
from decimal import Decimal
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("ENDPOINT_ALLOW_PRIVATE_NETWORKS", "1")
os.environ.setdefault("GRADING_BATCH_POLL_SECONDS", "0.1")

from bench._db import fresh_postgres
from bench._source_runs import stored_run

PAPER_CONVERSATIONS = 5_000
FILLER = (
    "rest fluids fever paracetamol dose hours doctor clinic warning sign breathing rash drink sleep watch "
    "child adult weight kilogram temperature cough throat pain urgent care pharmacy allergy history"
).split()
WORDS = [
    "kiwi",
    "mango",
    "papaya",
    "guava",
    "lychee",
    "quince",
    "feijoa",
    "durian",
    "longan",
    "rambutan",
    "cherry",
    "plum",
    "apricot",
]
PRICES = {"price_input": Decimal("2.00"), "price_cached_input": Decimal("0.50"), "price_output": Decimal("8.00")}
TOKENS_PER_MINUTE = 2_000_000


def _text(rng: random.Random, chars: int) -> str:
    words: list[str] = []
    while sum(len(w) + 1 for w in words) < chars:
        words.append(rng.choice(FILLER))
    return " ".join(words)


def build_source(conversations: int):
    """An imported run: one response per conversation, 11 or 12 criteria (11.4 on average),
    a conversation of ~1,500 characters and a response of ~1,150."""
    from annotation.models import Conversation, Criterion
    from grading.models import Response

    rng = random.Random(0)
    rows = Conversation.objects.bulk_create(
        [
            Conversation(
                prompt_id=f"batch-bench-{i}",
                messages=[
                    {"role": "user", "content": _text(rng, 600)},
                    {"role": "assistant", "content": _text(rng, 450)},
                    {"role": "user", "content": _text(rng, 450)},
                ],
                example_tags=["theme:hedging"],
            )
            for i in range(conversations)
        ]
    )
    criteria = Criterion.objects.bulk_create(
        [
            Criterion(
                conversation=c,
                position=j,
                text=f"Mentions need:{WORDS[j]} and says when to seek care. " + _text(rng, 40),
                points=rng.choice([5, 3, -2, 7, 6, -4]),
                tags=["level:example", "axis:accuracy"],
            )
            for c in rows
            for j in range(12 if rng.random() < 0.4 else 11)
        ]
    )
    responses = Response.objects.bulk_create(
        [
            Response(conversation=c, text=_text(rng, 1100) + " " + " ".join(w for w in WORDS if rng.random() < 0.5))
            for c in rows
        ]
    )
    return stored_run("batch-bench-source", 1, criteria, responses, WORDS)


def _spec_fields(mode: str) -> dict:
    """The RunRequest field that chooses the grading mode, where this version has one."""
    from grading.pipeline.run_request import RunRequest

    if "grading_mode" in RunRequest.__dataclass_fields__:
        return {"grading_mode": mode}
    if mode != "per-criterion":
        raise SystemExit(f"this version has no {mode} mode")
    return {}


def grade(source, mode: str, batched: bool, concurrency: int) -> dict:
    """One run of `mode`, live or batched, on a test server of its own."""
    from grading.models import Endpoint, Run, RunBatch
    from grading.pipeline.batches import Outcome, batch_run
    from grading.pipeline.estimate import plan_estimate, run_plan
    from grading.pipeline.progress import run_progress
    from grading.pipeline.run_launch import run_launch
    from grading.pipeline.run_request import RunRequest
    from tests.llm_server import LLMServer

    server = LLMServer().start()
    server.batches.validating_seconds = server.batches.finalizing_seconds = 0.01
    try:
        name = f"{mode}-{'batched' if batched else 'live'}"
        grader = Endpoint.objects.create(
            name=f"bench {name}",
            base_url=server.url,
            model="gpt-4.1",
            key_variable="",
            timeout_seconds=30,
            batch_discount=Decimal("0.5"),
            **PRICES,
        )
        spec = RunRequest(
            name=name,
            grader=grader,
            responses_from=source,
            concurrency=concurrency,
            use_cache=False,
            batch=batched,
            **_spec_fields(mode),
        )
        plan = run_plan(spec)
        estimate = plan_estimate(spec, plan)
        run = run_launch(spec=spec, plan=plan)
        start = time.perf_counter()
        while True:
            queued = list(run.batches.filter(status=RunBatch.Status.QUEUED).values_list("id", flat=True))
            if not queued:
                break
            if Outcome.WAITING in {batch_run(batch_id=batch_id) for batch_id in queued}:
                time.sleep(0.05)
        elapsed = time.perf_counter() - start
        run.refresh_from_db()
        if run.status != Run.Status.DONE:
            raise SystemExit(f"{name} ended {run.status}: {run.error}")
        progress = run_progress(run=run)
        if progress.failed:
            raise SystemExit(f"{name}: {progress.failed} grades failed")
        return {
            "name": name,
            "calls": server.calls,
            "input": progress.prompt_tokens,
            "cached": progress.cached_tokens,
            "output": progress.completion_tokens,
            "dollars": progress.grader_cost or Decimal(0),
            "estimate": estimate.grader_cost or Decimal(0),
            "estimate_calls": estimate.grader_calls,
            "provider_batches": len(progress.provider_batches),
            "seconds": elapsed,
            "grades": progress.graded,
        }
    finally:
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--conversations", type=int, default=400)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--modes", default="per-criterion,per-response")
    parser.add_argument("--database", default="healthbench_bench_batch")
    args = parser.parse_args()
    fresh_postgres(args.database)
    from django.conf import settings

    source = build_source(args.conversations)
    scale = PAPER_CONVERSATIONS / args.conversations
    modes = [m for m in args.modes.split(",") if m]
    try:
        _spec_fields("per-response")
    except SystemExit:
        if "per-response" in modes:
            print("note: this version has no per-response mode; measuring per-criterion only")
            modes = [m for m in modes if m != "per-response"]
    results = {
        (mode, batched): grade(source, mode, batched, args.concurrency) for mode in modes for batched in (False, True)
    }
    grades = results[(modes[0], False)]["grades"]
    print(
        f"{args.conversations:,} conversations, {grades:,} criteria ({grades / args.conversations:.2f} each); "
        f"figures scaled ×{scale:g} to {PAPER_CONVERSATIONS:,} conversations; GPT-4.1 prices, batch 50% off"
    )
    header = (
        "run",
        "calls",
        "input tok",
        "cached",
        "output tok",
        "dollars",
        "estimate $",
        "vs live",
        "least wall time",
    )
    print(f"{header[0]:24} " + " ".join(f"{h:>13}" for h in header[1:]))
    verdicts = []
    baseline = results[(modes[0], False)]["dollars"]
    for (mode, batched), r in results.items():
        live = results[(mode, False)]["dollars"]
        ratio = r["dollars"] / live if live else Decimal(0)
        if batched:
            units = -(-grades * scale // settings.GRADING_BATCHED_RUN_UNIT)
            wall = f"≤ 24 h, {units:.0f} batches"
        else:
            wall = f"{(r['input'] + r['output']) * scale / TOKENS_PER_MINUTE:.1f} min"
        dollars = r["dollars"] * Decimal(scale)
        print(
            f"{r['name']:24} {r['calls'] * scale:13,.0f} {r['input'] * scale:13,.0f} {r['cached'] * scale:13,.0f} "
            f"{r['output'] * scale:13,.0f} {dollars:13,.2f} {r['estimate'] * Decimal(scale):13,.2f} "
            f"{ratio:13.3f} {wall:>15}"
        )
        if batched:
            verdicts.append(
                f"{mode} batched ≤ 1/2 of live: {'met' if ratio <= Decimal('0.5') else 'MISSED'} ({ratio:.3f}×)"
            )
            if mode == "per-response":
                verdicts.append(
                    f"per-response + batch ≤ $20 at paper size: {'met' if dollars <= 20 else 'MISSED'} "
                    f"(${dollars:,.2f}; the per-criterion live baseline ${baseline * Decimal(scale):,.2f})"
                )
    for line in verdicts:
        print(line)


if __name__ == "__main__":
    main()
