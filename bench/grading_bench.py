"""Grade 20,000 (response, criterion) items with a real Celery worker against the test LLM
server (200 ms per call), beside the baseline: a plain pool of 120 threads calling the same
server one criterion at a time with the openai client, as the reference implementation does.

The pipeline runs once per endpoint mode (--modes): ``chat`` (an ordinary grader on Chat
Completions at temperature 0, the original HealthBench set-up), ``reasoning`` (a reasoning
model on Chat Completions: max_completion_tokens and reasoning_effort, no temperature) and
``responses`` (a reasoning model at low effort through the Responses API with a strict JSON
schema, the HealthBench Professional set-up). Each must reach 90% of its bound.

Target (issue: grading pipeline): throughput >= 90% of the concurrency bound
(concurrency / latency), on PostgreSQL and Redis, grades stored as they come.
Figures per grade: the wall overhead (slot time beyond the call's latency) and the CPU time
of the grading processes (the worker and its pool; the baseline's single process).

The worker runs 4 pool processes (celery worker --concurrency 4) on this 2-core machine:
grading waits on the network, and more event loops than cores keep each one from queueing
the answers of its calls. Celery's default, one process per core, is 2-4 points lower here.

Usage: REDIS_URL=redis://127.0.0.1:6379/0 .venv/bin/python bench/grading_bench.py [--grades 20000]
       [--concurrency 120] [--latency 0.2] [--worker-processes 4] [--modes chat,reasoning,responses]
"""

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
# The test LLM server listens on 127.0.0.1: a loopback endpoint, for this process and its worker.
os.environ.setdefault("ENDPOINT_ALLOW_PRIVATE_NETWORKS", "1")
# Queues of its own: other workers on the same Redis (other checkouts, other benchmarks)
# would otherwise take its tasks, find no such batch in their database, and drop them; the
# run then waits for the stall sweep (minutes).
os.environ.setdefault("CELERY_QUEUE_PREFIX", f"bench-grading-{os.getpid()}")

from bench._db import REPO, fresh_postgres
from bench._source_runs import stored_run

FILLER = "rest fluids fever paracetamol dose hours doctor clinic warning sign breathing rash drink sleep watch".split()
WORDS = ["kiwi", "mango", "papaya", "guava", "lychee", "quince", "feijoa", "durian", "longan", "rambutan"]
CRITERIA = 10
MODES = {
    "chat": {"model": "grader", "temperature": 0.0},
    "reasoning": {"model": "gpt-5.4", "reasoning": True, "reasoning_effort": "low", "temperature": None},
    "responses": {
        "model": "gpt-5.4",
        "api_style": "responses",
        "reasoning": True,
        "reasoning_effort": "low",
        "temperature": None,
        "structured_output": True,
    },
}


def _text(rng: random.Random, n_words: int) -> str:
    return " ".join(rng.choice(FILLER) for _ in range(n_words))


def build_source(n_grades: int, samples: int = 4):
    """An imported run of n_grades grades: 10 criteria per response, 4 responses per conversation,
    prompts of about 4,500 characters (a few turns and a reply of ~1,500 characters)."""
    from annotation.models import Conversation, Criterion
    from grading.models import Response

    rng = random.Random(0)
    n_responses = n_grades // CRITERIA
    n_conversations = n_responses // samples
    conversations = Conversation.objects.bulk_create(
        [
            Conversation(
                prompt_id=f"bench-{i}",
                messages=[
                    {"role": "user", "content": _text(rng, 60)},
                    {"role": "assistant", "content": _text(rng, 40)},
                    {"role": "user", "content": _text(rng, 50)},
                ],
                example_tags=["theme:hedging"],
            )
            for i in range(n_conversations)
        ]
    )
    criteria = Criterion.objects.bulk_create(
        [
            Criterion(
                conversation=c,
                position=j,
                text=f"Mentions need:{WORDS[j]}. " + _text(rng, 15),
                points=rng.choice([5, 3, -2, 7]),
                tags=["level:example", "axis:accuracy"],
            )
            for c in conversations
            for j in range(CRITERIA)
        ]
    )
    responses = Response.objects.bulk_create(
        [
            Response(
                conversation=c,
                sample_index=k,
                text=_text(rng, 200) + " " + " ".join(w for w in WORDS if rng.random() < 0.5),
            )
            for c in conversations
            for k in range(samples)
        ]
    )
    return stored_run("bench-source", samples, criteria, responses, WORDS)


def process_tree_cpu(root: int) -> float:
    """CPU seconds (user + system) of a process and its live descendants, from /proc."""
    ticks = os.sysconf("SC_CLK_TCK")
    parent_of, cpu = {}, {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parent_of[int(entry.name)] = int(fields[1])
        cpu[int(entry.name)] = (int(fields[11]) + int(fields[12])) / ticks
    total = 0.0
    for pid in cpu:
        p = pid
        while p and p != root:
            p = parent_of.get(p, 0)
        if p == root:
            total += cpu[pid]
    return total


def run_pipeline(server, source, args, mode: str, grading_mode: str = "per-criterion") -> dict:
    from grading.models import Endpoint, Grade, Run
    from grading.pipeline.estimate import RunSpec
    from grading.pipeline.run_launch import run_launch

    log = Path(tempfile.mkstemp(suffix=".log")[1])
    # INFO: the worker takes its level from LOG_LEVEL, and its "ready." line is logged at INFO.
    env = {**os.environ, "LOG_LEVEL": "INFO"}
    command = [
        sys.executable,
        "-m",
        "celery",
        "-A",
        "healthbench_web",
        "worker",
        "--loglevel",
        "INFO",
        "--concurrency",
        str(args.worker_processes),
        "--without-gossip",
        "--without-mingle",
        "--hostname",
        "bench@%h",
    ]
    worker = subprocess.Popen(
        command, cwd=REPO, env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT, start_new_session=True
    )
    try:
        deadline = time.monotonic() + 60
        while " ready." not in log.read_text():
            if time.monotonic() > deadline or worker.poll() is not None:
                raise SystemExit(f"the worker did not start:\n{log.read_text()[-3000:]}")
            time.sleep(0.2)
        time.sleep(1)  # let the pool's processes finish starting
        grader = Endpoint.objects.create(
            name=f"bench-{mode}", base_url=server.url, key_variable="", timeout_seconds=30, **MODES[mode]
        )
        cpu_before = process_tree_cpu(worker.pid)
        start = time.perf_counter()
        run = run_launch(
            spec=RunSpec(
                name=f"bench-regrade-{mode}",
                grader=grader,
                responses_from=source,
                concurrency=args.concurrency,
                use_cache=False,
                grading_mode=grading_mode,
            )
        )
        while Run.objects.filter(id=run.id, status=Run.Status.RUNNING).exists():
            time.sleep(0.05)
        elapsed = time.perf_counter() - start
        cpu = process_tree_cpu(worker.pid) - cpu_before
        run.refresh_from_db()
        grades = Grade.objects.filter(run=run)
        assert run.status == Run.Status.DONE, run.status
        assert grades.count() == run.total_items == args.grades
        assert not grades.filter(status=Grade.Status.FAILED).exists()
        if MODES[mode].get("reasoning"):  # the usage details came back and were stored
            assert not grades.filter(reasoning_tokens=0).exists()
        return {"elapsed": elapsed, "cpu": cpu, "grades": run.total_items}
    finally:
        os.killpg(worker.pid, 15)
        worker.wait(timeout=30)
        log.unlink()


def baseline_child(url: str, prompts_file: str, threads: int) -> None:
    """The baseline, run in its own process: a pool of threads, one criterion per call."""
    import resource

    import openai

    from grading.pipeline.grader_prompt import parse_answer

    prompts = json.loads(Path(prompts_file).read_text())
    client = openai.OpenAI(base_url=url, api_key="unused", max_retries=3, timeout=30)

    def grade(prompt: str) -> bool:
        reply = client.chat.completions.create(
            model="grader", messages=[{"role": "user", "content": prompt}], temperature=0, max_tokens=2048
        )
        return parse_answer(reply.choices[0].message.content).met

    usage = resource.getrusage(resource.RUSAGE_SELF)
    cpu_before = usage.ru_utime + usage.ru_stime
    start = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        verdicts = list(pool.map(grade, prompts))
    elapsed = time.perf_counter() - start
    usage = resource.getrusage(resource.RUSAGE_SELF)
    print(
        json.dumps({"elapsed": elapsed, "cpu": usage.ru_utime + usage.ru_stime - cpu_before, "grades": len(verdicts)})
    )


def run_baseline(server, source, args) -> dict:
    from grading.models import Grade
    from grading.pipeline.grader_prompt import DEFAULT_TEMPLATE, conversation_block, render, rubric_item

    prompts = [
        render(
            DEFAULT_TEMPLATE,
            conversation=conversation_block(g.response.conversation.messages, g.response.text),
            item=rubric_item(g.criterion_text, g.points),
        )
        for g in Grade.objects.filter(run=source).select_related("response__conversation").order_by("id")
    ]
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as handle:
        json.dump(prompts, handle)
    try:
        done = subprocess.run(
            [sys.executable, __file__, "--baseline-child", server.url, handle.name, str(args.baseline_threads)],
            capture_output=True,
            text=True,
            check=True,
        )
    finally:
        os.unlink(handle.name)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--grades", type=int, default=20_000)
    parser.add_argument("--concurrency", type=int, default=120)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--worker-processes", type=int, default=4)
    parser.add_argument("--baseline-threads", type=int, default=120)
    parser.add_argument("--database", default="healthbench_bench_grading")
    parser.add_argument("--modes", default="chat,reasoning,responses", help="endpoint modes to run, comma-separated")
    parser.add_argument("--baseline-child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.baseline_child:
        baseline_child(args.baseline_child[0], args.baseline_child[1], int(args.baseline_child[2]))
        return
    if not os.environ.get("REDIS_URL"):
        print("note: REDIS_URL is not set: the worker uses the filesystem broker and per-process limits")

    fresh_postgres(args.database)
    from tests.llm_server import LLMServer

    server = LLMServer(latency=args.latency).start()
    source = build_source(args.grades)
    print(
        f"{args.grades:,} grades, server latency {args.latency * 1000:.0f} ms per call, PostgreSQL, "
        f"{'Redis' if os.environ.get('REDIS_URL') else 'filesystem broker'}, {os.cpu_count()} cores"
    )

    rows = []
    modes = [m for m in args.modes.split(",") if m]
    runs = [
        (
            f"pipeline {mode}: 1 worker x {args.worker_processes} processes",
            args.concurrency,
            run_pipeline(server, source, args, mode),
        )
        for mode in modes
    ]
    runs.append(
        (
            f"baseline: {args.baseline_threads} threads, nothing stored",
            args.baseline_threads,
            run_baseline(server, source, args),
        )
    )
    for label, concurrency, figures in runs:
        bound = concurrency / args.latency
        rate = figures["grades"] / figures["elapsed"]
        wall_overhead = (figures["elapsed"] * concurrency / figures["grades"] - args.latency) * 1000
        rows.append(
            (
                label,
                concurrency,
                bound,
                figures["elapsed"],
                rate,
                rate / bound,
                wall_overhead,
                figures["cpu"] * 1000 / figures["grades"],
            )
        )
    server.stop()

    widths = {
        "in flight": 9,
        "bound/s": 8,
        "time s": 7,
        "grades/s": 9,
        "of bound": 8,
        "overhead/grade": 15,
        "CPU/grade": 10,
    }
    print(" " * 52, *(f"{name:>{width}}" for name, width in widths.items()))
    for label, concurrency, bound, elapsed, rate, share, overhead, cpu in rows:
        line = (
            f"{concurrency:9d} {bound:8.0f} {elapsed:7.1f} {rate:9.1f} {share:8.1%} {overhead:12.1f} ms {cpu:7.2f} ms"
        )
        print(f"{label:52} {line}")
    for (label, *_), mode in zip(rows, modes, strict=False):
        share = next(row[5] for row in rows if row[0] == label)
        verdict = "target met (>= 90% of its bound)" if share >= 0.9 else f"TARGET MISSED: {share:.1%} of the bound"
        print(f"{mode}: {verdict}; {share / rows[-1][5]:.2f}x the baseline's share of its bound")


if __name__ == "__main__":
    main()
