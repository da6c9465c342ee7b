"""What each grading mode costs at paper size, measured through the test LLM server, beside
per-criterion live grading (the reference's way) as the baseline, in the same run.

Part 1, accounting: 5,000 conversations drawn from the public sample rows
(../shared/healthbench-samples/eval_sample.jsonl; each made unique by its first words, so no
two share a cached prefix), weighted so that they average about 11.4 criteria, each with one
response (the row's ideal completion, or its last assistant turn). Every grader prompt of
each mode is rendered by the product's own code and sent through its client
(grading.pipeline.client) to the test server, whose usage reports the prompt, cached and
output tokens the way OpenAI does (cache from 1,024 tokens, in steps of 128). For each mode:
calls, input tokens, cached input tokens, output tokens, dollars at GPT-4.1 prices ($2.00
input, $0.50 cached input, $8.00 output per million tokens), the least wall time of a full
run under a 2,000,000 tokens-per-minute limit (its tokens / the limit), and beside it the
estimate the product shows before launch for the same run (grading.pipeline.estimate). The
batched rows are the same run at the endpoint's batch discount (grading.pipeline.cost).

Part 2, throughput (--throughput, run on its own): per-response grading through a real Celery worker on
PostgreSQL against the test server at 200 ms per call, in criteria judged per second,
against its bound (concurrency / latency x criteria per call); bench/grading_bench.py's
source and worker. Needs PostgreSQL (DATABASE_URL) and preferably Redis (REDIS_URL).

Targets: per-response <= 1/8 of the baseline's calls and <= 1/4 of its input tokens;
per-response grading >= 90% of its concurrency bound.

Usage: .venv/bin/python bench/grading_modes_bench.py [--conversations 5000] [--concurrency 64]
       [--explanation sentence]
       DATABASE_URL=... REDIS_URL=... .venv/bin/python bench/grading_modes_bench.py --throughput [--grades 60000]
"""

import argparse
import asyncio
import json
import math
import os
import random
import sys
import time
from collections.abc import Awaitable, Callable
from decimal import Decimal
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "healthbench_web.settings")
os.environ.setdefault("ENDPOINT_ALLOW_PRIVATE_NETWORKS", "1")
os.environ.setdefault("LOG_LEVEL", "WARNING")  # as bench/__init__.py, which this one does not import

SAMPLES = Path(__file__).resolve().parents[2] / "shared" / "healthbench-samples" / "eval_sample.jsonl"
PAPER_CRITERIA = 11.4
GPT41 = {"price_input": Decimal("2.00"), "price_cached_input": Decimal("0.50"), "price_output": Decimal("8.00")}
BATCH_DISCOUNT = Decimal("0.50")  # OpenAI's Batch API: half the live prices
TPM = 2_000_000


def paper_rows(n: int, seed: int = 0) -> list[dict]:
    """`n` rows drawn from the sample file, weighted towards shorter rubrics so that the mean is
    about the paper's 11.4 criteria (the sample rows average 12.1)."""
    rows = [json.loads(line) for line in SAMPLES.read_text().splitlines() if line.strip()]
    sizes = [len(r["rubrics"]) for r in rows]

    def mean_for(rate: float) -> float:
        weights = [math.exp(-rate * s) for s in sizes]
        return sum(w * s for w, s in zip(weights, sizes, strict=True)) / sum(weights)

    low, high = 0.0, 1.0
    for _ in range(40):  # bisect the weight's rate for the paper's mean
        mid = (low + high) / 2
        low, high = (mid, high) if mean_for(mid) > PAPER_CRITERIA else (low, mid)
    rng = random.Random(seed)
    return rng.choices(rows, weights=[math.exp(-low * s) for s in sizes], k=n)


def conversations(n: int) -> list[tuple[list[dict], str, list[tuple[str, int]]]]:
    """(messages, response, criteria) per conversation, each unique from its first words."""
    out = []
    for k, row in enumerate(paper_rows(n)):
        messages = [dict(m) for m in row["prompt"]]
        messages[0]["content"] = f"(Case {k}.) {messages[0]['content']}"
        ideal = (row.get("ideal_completions_data") or {}).get("ideal_completion")
        response = ideal or next(
            (m["content"] for m in reversed(row["prompt"]) if m["role"] == "assistant"), "Please see a doctor."
        )
        out.append((messages, response, [(r["criterion"], int(r["points"])) for r in row["rubrics"]]))
    return out


async def send_all(target, jobs, concurrency: int):
    """Every job (a coroutine factory) with at most `concurrency` in flight; returns the outcomes."""
    from grading.pipeline import client as llm

    queue = list(enumerate(jobs))
    results: list = [None] * len(jobs)

    async def lane():
        while queue:
            index, job = queue.pop()
            results[index] = await job()

    try:
        await asyncio.gather(*(lane() for _ in range(concurrency)))
    finally:
        await llm.close_clients()
    return results


def measure(mode: str, data, server_url: str, concurrency: int, explanation: str) -> dict:
    """Grade every (response, criterion) in `mode` through the product's client; the usage as reported."""
    from grading.pipeline.client import RetryPolicy, ask_grader_chunk
    from grading.pipeline.endpoint import CallTarget
    from grading.pipeline.grader_prompt import DEFAULT_TEMPLATE, conversation_block, render, rubric_item
    from grading.pipeline.modes.per_response import NAME as PER_RESPONSE
    from grading.pipeline.rate_limit import LocalRateLimiter
    from grading.pipeline.response_prompt import CRITERIA_PER_CALL, chunk_bounds, render_chunk

    target = CallTarget(
        base_url=server_url, model="gpt-4.1", api_key_env="", temperature=0.0, max_tokens=2048, timeout=60.0
    )
    limiter, policy = LocalRateLimiter(), RetryPolicy(base_delay=0.01, max_delay=0.05)
    jobs: list[Callable[[], Awaitable[list]]] = []
    for messages, response, criteria in data:
        block = conversation_block(messages, response)
        prompts = [render(DEFAULT_TEMPLATE, conversation=block, item=rubric_item(t, p)) for t, p in criteria]
        if mode == PER_RESPONSE:
            for start, stop in chunk_bounds(len(criteria), CRITERIA_PER_CALL):
                chunk_prompt = render_chunk(conversation=block, items=criteria[start:stop], explanation=explanation)
                fallback = prompts[start:stop]
                jobs.append(
                    partial(
                        ask_grader_chunk,
                        target,
                        chunk_prompt,
                        stop - start,
                        fallback.__getitem__,
                        limiter=limiter,
                        policy=policy,
                    )
                )
        else:
            jobs += [partial(_one, target, p, limiter, policy) for p in prompts]
    begin = time.perf_counter()
    outcomes = [o for batch in asyncio.run(send_all(target, jobs, concurrency)) for o in batch]
    elapsed = time.perf_counter() - begin
    assert all(o.met is not None for o in outcomes), "a grade failed"
    return {
        "criteria": len(outcomes),
        "calls": sum(o.attempts for o in outcomes),
        "fallbacks": sum(o.fallback for o in outcomes),
        "input": sum(o.prompt_tokens for o in outcomes),
        "cached": sum(o.cached_tokens for o in outcomes),
        "output": sum(o.completion_tokens for o in outcomes),
        "seconds": elapsed,
    }


async def _one(target, prompt: str, limiter, policy) -> list:
    from grading.pipeline.client import ask_grader

    return [await ask_grader(target, prompt, limiter=limiter, policy=policy)]


def product_estimate(mode: str, data, explanation: str, *, batch: bool = False):
    """The estimate the product shows before launching the same run (its own functions)."""
    from grading.models import Endpoint
    from grading.pipeline.estimate import plan_estimate, responses_plan
    from grading.pipeline.modes.per_response import NAME as PER_RESPONSE
    from grading.pipeline.run_request import RunRequest

    grader = Endpoint(name="gpt-4.1", model="gpt-4.1", batch_discount=BATCH_DISCOUNT, **GPT41)
    spec = RunRequest(
        name="paper",
        grader=grader,
        grading_mode=mode,
        explanation_length=explanation if mode == PER_RESPONSE else "",
        batch=batch,
    )
    responses = (
        (k, len(criteria), len(json.dumps(messages)) + len(response), sum(len(t) for t, _ in criteria))
        for k, (messages, response, criteria) in enumerate(data)
    )
    return plan_estimate(spec, responses_plan(spec, responses))


def dollars(input_tokens: int, cached: int, output: int, discount: Decimal | None = None) -> Decimal:
    """What to put in a batched row: the live cost at the endpoint's batch discount."""
    from grading.pipeline.cost import Prices, cost_of

    prices = Prices(GPT41["price_input"], GPT41["price_cached_input"], GPT41["price_output"]).batched(discount)
    cost = cost_of(prices, prompt_tokens=input_tokens, cached_tokens=cached, completion_tokens=output)
    assert cost is not None
    return cost


def throughput(args) -> None:
    """Per-response grading through a real worker: criteria judged per second against its bound."""
    from types import SimpleNamespace

    # grading_bench names the run's own queues in the environment: before Django reads its settings.
    from bench import grading_bench
    from bench._db import fresh_postgres

    fresh_postgres(args.database)
    from tests.llm_server import LLMServer

    server = LLMServer(latency=args.latency).start()
    try:
        source = grading_bench.build_source(args.grades)
        settings = SimpleNamespace(worker_processes=4, concurrency=args.worker_concurrency, grades=args.grades)
        figures = grading_bench.run_pipeline(server, source, settings, "chat", grading_mode="per-response")
    finally:
        server.stop()
    per_call = grading_bench.CRITERIA
    bound = args.worker_concurrency / args.latency * per_call
    rate = figures["grades"] / figures["elapsed"]
    verdict = "met" if rate >= 0.9 * bound else "MISSED"
    print(
        f"\nper-response through a Celery worker: {figures['grades']:,} criteria in {figures['elapsed']:.1f} s, "
        f"{rate:,.0f} criteria/s; bound {bound:,.0f}/s ({args.worker_concurrency} calls in flight / "
        f"{args.latency * 1000:.0f} ms x {per_call} criteria a call): {rate / bound:.1%} of the bound "
        f"(target >= 90%: {verdict})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--conversations", type=int, default=5000)
    parser.add_argument("--concurrency", type=int, default=64, help="calls in flight for the accounting part")
    parser.add_argument("--explanation", default="sentence", help="per-response explanation length")
    parser.add_argument(
        "--throughput", action="store_true", help="only time per-response grading through a worker (PostgreSQL)"
    )
    parser.add_argument("--grades", type=int, default=60_000, help="criteria graded in the throughput part")
    parser.add_argument("--worker-concurrency", type=int, default=120)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--database", default="healthbench_bench_grading_modes", help="the throughput part's database")
    args = parser.parse_args()
    if args.throughput:
        # A process of its own: the accounting part sets Django up on the default database.
        throughput(args)
        return
    if not SAMPLES.exists():
        raise SystemExit(f"the sample rows are not at {SAMPLES}")

    import django

    django.setup()
    from tests.llm_server import LLMServer

    data = conversations(args.conversations)
    n_criteria = sum(len(c) for _, _, c in data)
    print(
        f"{len(data):,} conversations, {n_criteria:,} criteria ({n_criteria / len(data):.2f} each), one response "
        f"each; GPT-4.1 prices; explanation per criterion: {args.explanation}"
    )
    rows = {}
    for mode in ("per-criterion", "per-response"):
        server = LLMServer().start()  # a fresh prompt cache for each mode
        try:
            rows[mode] = measure(mode, data, server.url, args.concurrency, args.explanation)
        finally:
            server.stop()
        rows[mode]["estimate"] = product_estimate(mode, data, args.explanation)
        rows[mode]["estimate_batched"] = product_estimate(mode, data, args.explanation, batch=True)
    base = rows["per-criterion"]
    header = (
        f"{'':32} {'calls':>8} {'input':>12} {'cached':>12} {'cached %':>8} {'output':>11} {'dollars':>9} "
        f"{'min @2M TPM':>11} {'vs baseline':>22}"
    )
    print(header)
    for mode, row in rows.items():
        for batched in (False, True):
            discount = BATCH_DISCOUNT if batched else None
            cost = dollars(row["input"], row["cached"], row["output"], discount)
            minutes = (row["input"] + row["output"]) / TPM
            label = f"{mode}{' batched' if batched else ' live'} (measured)"
            ratio = (
                f"calls {row['calls'] / base['calls']:.3f}x, input {row['input'] / base['input']:.3f}x"
                if mode != "per-criterion"
                else "baseline"
            )
            # The Batch API has its own limit (tokens enqueued), not the live TPM: no wall time.
            time_text = "—" if batched else f"{minutes:.1f}"
            print(
                f"{label:32} {row['calls']:>8,} {row['input']:>12,} {row['cached']:>12,} "
                f"{row['cached'] / row['input']:>8.1%} {row['output']:>11,} {cost:>9,.2f} {time_text:>11} {ratio:>22}"
            )
        estimate = row["estimate"]
        cached = int(estimate.prompt_tokens * estimate.cached_share)
        print(
            f"{mode + ' (product estimate)':32} {estimate.grader_calls:>8,} {estimate.prompt_tokens:>12,} "
            f"{cached:>12,} {estimate.cached_share:>8.1%} {estimate.completion_tokens:>11,} "
            f"{estimate.grader_cost:>9,.2f} {(estimate.prompt_tokens + estimate.completion_tokens) / TPM:>11.1f}"
        )
        batched = row["estimate_batched"]
        print(f"{mode + ' batched (product estimate)':32} {'':>68} {batched.grader_cost:>9,.2f}")
        if row["fallbacks"]:
            print(f"  {row['fallbacks']:,} per-criterion fallbacks")
    pr = rows["per-response"]
    calls_ok = pr["calls"] <= base["calls"] / 8
    input_ok = pr["input"] <= base["input"] / 4
    print(
        f"targets: per-response calls {pr['calls'] / base['calls']:.3f}x the baseline (<= 0.125: "
        f"{'met' if calls_ok else 'MISSED'}), input tokens {pr['input'] / base['input']:.3f}x (<= 0.25: "
        f"{'met' if input_ok else 'MISSED'})"
    )


if __name__ == "__main__":
    main()
