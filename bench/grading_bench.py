"""Grade 20,000 (response, criterion) items with a real Celery worker against the test LLM
server (200 ms per call), beside two baselines in the same run: the same pipeline from the
baseline's code (--baseline-ref, main by default, checked out by the bench into a temporary
directory and run by a worker of its own on the same database and server), and a plain pool
of 120 threads calling the same server one criterion at a time with the openai client, as
the reference implementation does (--thread-baseline).

The pipeline runs once per endpoint mode (--modes): ``chat`` (an ordinary grader on Chat
Completions at temperature 0, the original HealthBench set-up), ``reasoning`` (a reasoning
model on Chat Completions: max_completion_tokens and reasoning_effort, no temperature) and
``responses`` (a reasoning model at low effort through the Responses API with a strict JSON
schema, the HealthBench Professional set-up); per grading mode (--grading-modes:
per-criterion, per-response, whose figures are per criterion judged); and per number of
calls in flight (--concurrency, e.g. 40,120).

Targets: throughput >= 90% of the concurrency bound (concurrency / latency) on PostgreSQL and
Redis, grades stored as they come (issue: grading pipeline); worker CPU <= 1 ms per
per-criterion grade and <= 0.3 ms per criterion per response (issue 32). Figures per grade:
the wall overhead (slot time beyond the call's latency) and the CPU time of the grading
processes (the worker and its pool; the thread baseline's single process), with the load
average of the machine beside each run (the machine is shared: CPU is the figure that holds).

The worker runs 4 pool processes (celery worker --concurrency 4) on this 2-core machine:
grading waits on the network, and more event loops than cores keep each one from queueing
the answers of its calls. Celery's default, one process per core, is 2-4 points lower here.

Usage: REDIS_URL=redis://127.0.0.1:6379/0 .venv/bin/python bench/grading_bench.py [--grades 20000]
       [--concurrency 40,120] [--latency 0.2] [--worker-processes 4] [--modes chat,reasoning,responses]
       [--grading-modes per-criterion,per-response] [--baseline-ref main] [--thread-baseline]
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


def baseline_tree(ref: str) -> Path:
    """The baseline's code (`ref`), checked out into a temporary directory."""
    tree = Path(tempfile.mkdtemp(prefix="grading-bench-baseline-"))
    archive = subprocess.run(["git", "-C", str(REPO), "archive", ref], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    return tree


def run_pipeline(
    server,
    source,
    args,
    mode: str,
    grading_mode: str = "per-criterion",
    *,
    repo: Path = REPO,
    concurrency: int | None = None,
    strict: bool = True,
    grader_options: dict | None = None,
) -> dict:
    from grading.models import Endpoint, Grade, Run
    from grading.pipeline.run_launch import run_launch
    from grading.pipeline.run_request import RunRequest

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
        command, cwd=repo, env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT, start_new_session=True
    )
    try:
        deadline = time.monotonic() + 60
        while " ready." not in log.read_text():
            if time.monotonic() > deadline or worker.poll() is not None:
                raise SystemExit(f"the worker did not start:\n{log.read_text()[-3000:]}")
            time.sleep(0.2)
        time.sleep(1)  # let the pool's processes finish starting
        grader = Endpoint.objects.create(
            name=f"bench-{mode}-{Endpoint.objects.count()}",
            base_url=server.url,
            key_variable="",
            timeout_seconds=30,
            **(MODES[mode] | (grader_options or {})),
        )
        cpu_before = process_tree_cpu(worker.pid)
        start = time.perf_counter()
        run = run_launch(
            spec=RunRequest(
                name=f"bench-regrade-{mode}-{Run.objects.count()}",
                grader=grader,
                responses_from=source,
                concurrency=concurrency or args.concurrency,
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
        failed = grades.filter(status=Grade.Status.FAILED).count()
        if not strict:  # what happened is the figure (bench/rate_limit_bench.py)
            return {
                "elapsed": elapsed,
                "cpu": cpu,
                "grades": grades.count() - failed,
                "failed": failed,
                "status": run.status,
                "load": os.getloadavg()[0],
            }
        assert run.status == Run.Status.DONE, run.status
        assert grades.count() == run.total_items == args.grades
        assert not failed
        if MODES[mode].get("reasoning"):  # the usage details came back and were stored
            assert not grades.filter(reasoning_tokens=0).exists()
        return {"elapsed": elapsed, "cpu": cpu, "grades": run.total_items, "load": os.getloadavg()[0]}
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
        json.dumps(
            {
                "elapsed": elapsed,
                "cpu": usage.ru_utime + usage.ru_stime - cpu_before,
                "grades": len(verdicts),
                "load": os.getloadavg()[0],
            }
        )
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
    parser.add_argument("--concurrency", default="120", help="calls in flight, comma-separated (e.g. 40,120)")
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--worker-processes", type=int, default=4)
    parser.add_argument("--baseline-threads", type=int, default=120)
    parser.add_argument("--database", default="healthbench_bench_grading")
    parser.add_argument("--modes", default="chat,reasoning,responses", help="endpoint modes to run, comma-separated")
    parser.add_argument("--grading-modes", default="per-criterion", help="per-criterion, per-response, or both")
    parser.add_argument(
        "--baseline-ref", default="main", help="the code the pipeline is measured against ('' for none)"
    )
    parser.add_argument("--thread-baseline", action="store_true", help="also time the reference's thread pool")
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
    tree = baseline_tree(args.baseline_ref) if args.baseline_ref else None
    print(
        f"{args.grades:,} grades, server latency {args.latency * 1000:.0f} ms per call, PostgreSQL, "
        f"{'Redis' if os.environ.get('REDIS_URL') else 'filesystem broker'}, {os.cpu_count()} cores; "
        f"baseline: {args.baseline_ref or 'none'}"
    )
    header = ("in flight", "bound/s", "time s", "grades/s", "of bound", "overhead/grade", "CPU/grade", "load")
    print(f"{'':58} " + " ".join(f"{h:>{max(8, len(h))}}" for h in header))
    sides = [("this branch", REPO)] + ([(f"baseline {args.baseline_ref}", tree)] if tree else [])
    cpu_of: dict[tuple, float] = {}
    try:
        for grading_mode in [g for g in args.grading_modes.split(",") if g]:
            per_call = CRITERIA if grading_mode == "per-response" else 1
            for mode in [m for m in args.modes.split(",") if m]:
                for concurrency in [int(c) for c in args.concurrency.split(",") if c]:
                    for side, repo in sides:
                        figures = run_pipeline(
                            server, source, args, mode, grading_mode, repo=repo, concurrency=concurrency
                        )
                        label = f"{side}: {mode} {grading_mode}"
                        cpu_of[(side, mode, grading_mode, concurrency)] = _row(
                            label, concurrency, concurrency / args.latency * per_call, args.latency / per_call, figures
                        )
        if args.thread_baseline:
            figures = run_baseline(server, source, args)
            _row(f"threads: {args.baseline_threads}, nothing stored", args.baseline_threads, 0, args.latency, figures)
    finally:
        server.stop()
    for (side, mode, grading_mode, concurrency), cpu in cpu_of.items():
        if side != "this branch":
            continue
        target = 0.3 if grading_mode == "per-response" else 1.0
        base = cpu_of.get((sides[-1][0], mode, grading_mode, concurrency))
        versus = f", {base / cpu:.2f}x less than the baseline's {base:.2f} ms" if base and len(sides) > 1 else ""
        verdict = "met" if cpu <= target else "MISSED"
        print(
            f"{mode} {grading_mode} at {concurrency} in flight: {cpu:.2f} ms of worker CPU per "
            f"{'criterion' if grading_mode == 'per-response' else 'grade'} (target <= {target} ms: {verdict}){versus}"
        )


def _row(label: str, concurrency: int, bound: float, latency: float, figures: dict) -> float:
    """Print one run's line; returns its CPU milliseconds per grade (per criterion judged)."""
    rate = figures["grades"] / figures["elapsed"]
    bound = bound or concurrency / latency
    overhead = (figures["elapsed"] * concurrency / figures["grades"] - latency) * 1000
    cpu = figures["cpu"] * 1000 / figures["grades"]
    print(
        f"{label:58} {concurrency:9d} {bound:8.0f} {figures['elapsed']:8.1f} {rate:8.1f} {rate / bound:8.1%} "
        f"{overhead:11.1f} ms {cpu:6.2f} ms {figures['load']:8.1f}",
        flush=True,
    )
    return cpu


if __name__ == "__main__":
    main()
