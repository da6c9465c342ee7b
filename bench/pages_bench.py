"""Physician pages under load: a paper-size database served by gunicorn, 16 concurrent clients.

Builds 5,000 conversations (~57,000 criteria) with bench/generate.py and the real importer,
200 physicians with their tasks (given out by the real assignment service), then serves the
app with gunicorn on loopback (DEBUG off, as in production) and loads the physician pages
from a second process: 16 client threads, each keeping its session cookie and a keep-alive
connection, each round opening the home page, the rubric editor, the ideal-response editor,
the consensus ballot, a labeling item, and labeling it (the htmx POST that brings the next
item). Bounded: --rounds per client and --seconds overall.

Target (issue 6): 95th-percentile latency <= 150 ms on every page.
Usage: .venv/bin/python bench/pages_bench.py [--conversations 5000] [--physicians 200] [--clients 16]
"""

import argparse
import http.client
import json
import os
import random
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

TARGET_P95_MS = 150
PAGES = ["home", "rubric editor", "ideal editor", "ballot", "label item", "label (htmx POST)"]
SECRET_KEY = "pages-bench-not-a-secret-" + "x" * 40
SPECIALTIES = ["Emergency medicine", "Family medicine", "Internal medicine", "Pediatrics", "Cardiology", "Psychiatry", "Obstetrics", "Public health"]
LANGUAGES = ["en", "es", "fr", "pt", "sw", "hi", "ar", "zh"]


def _server_env(database_url: str, static_root: str, var_dir: str) -> dict:
    env = dict(os.environ)
    env.update(
        DATABASE_URL=database_url,
        DEBUG="0",
        SECRET_KEY=SECRET_KEY,
        ALLOWED_HOSTS="127.0.0.1,localhost",
        SECURE_SSL_REDIRECT="0",
        STATIC_ROOT=static_root,
        VAR_DIR=var_dir,
        LOG_LEVEL="ERROR",
    )
    return env


# ---------------------------------------------------------------- the data


def build(args) -> dict:
    """Create the database and return what the clients need: per physician, session and task URLs."""
    from bench._db import fresh_postgres

    os.environ["SECRET_KEY"] = SECRET_KEY  # sessions are signed with it: the server must agree
    start = time.perf_counter()
    fresh_postgres(args.database)
    from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY
    from django.contrib.auth.hashers import make_password
    from django.contrib.auth.models import User
    from django.contrib.sessions.backends.db import SessionStore
    from django.db import connection
    from django.db.models import Count

    from annotation.healthbench_import import import_healthbench_lines
    from annotation.models import (
        Assignment,
        ConsensusCriterion,
        ConsensusVote,
        Conversation,
        Criterion,
        IdealResponse,
        Physician,
    )
    from annotation.services.assignments import assignments_create
    from bench.generate import healthbench_lines
    from grading.models import Response
    from healthbench_web.bulk import db_now, insert_rows, new_codes

    rng = random.Random(1)
    lines = healthbench_lines(args.conversations)
    import_healthbench_lines((line.encode() for line in lines), subset_name="bench")
    print(f"data: {Conversation.objects.count()} conversations, {Criterion.objects.count()} criteria", flush=True)

    password = make_password(None)  # unusable: clients use sessions made here, not the login form
    users = User.objects.bulk_create(User(username=f"doc{n:03d}", password=password) for n in range(args.physicians))
    physicians = Physician.objects.bulk_create(
        Physician(
            user=u,
            specialty=rng.choice(SPECIALTIES),
            languages=rng.sample(LANGUAGES, rng.randint(1, 3)),
            status=Physician.Status.ACTIVE if n % 20 else Physician.Status.TRIAL,
        )
        for n, u in enumerate(users)
    )
    ids = list(Conversation.objects.order_by("id").values_list("id", flat=True))
    now, codes = db_now(), iter(new_codes(2 * len(ids)))
    insert_rows(
        Response,
        ["code", "conversation_id", "text", "source", "model_name", "parameters", "sample_index", "completion_id", "created"],
        [
            (next(codes), cid, f"Sample {k} for conversation {cid}. " + "Rest, fluids and review. " * 40, "sampled",
             "bench-model", "{}", k, f"bench:{cid}:{k}", now)  # fmt: skip
            for cid in ids
            for k in range(2)
        ],
    )
    half = len(ids) // 2
    assignments_create(kind=Assignment.Kind.RUBRIC, conversation_ids=ids, physicians=physicians, per_item=1, assigned_by=None)
    assignments_create(kind=Assignment.Kind.CONSENSUS_VOTE, conversation_ids=ids[:half], physicians=physicians, per_item=2, assigned_by=None)
    for chunk, condition in ((ids[:half:2], IdealResponse.Condition.WITH_REFERENCE), (ids[1:half:2], IdealResponse.Condition.NO_REFERENCE)):
        assignments_create(
            kind=Assignment.Kind.IDEAL_RESPONSE, conversation_ids=chunk, physicians=physicians, per_item=1,
            assigned_by=None, condition=condition,
        )  # fmt: skip
    assignments_create(kind=Assignment.Kind.LABEL, conversation_ids=ids, physicians=physicians, per_item=2, assigned_by=None)
    # Some work already done, so that pages show votes and progress.
    votes = list(
        Assignment.objects.filter(kind=Assignment.Kind.CONSENSUS_VOTE)
        .select_related("conversation")
        .only("id", "physician_id", "conversation_id", "conversation__theme")
    )
    by_theme: dict[str, list[int]] = {}
    for cc_id, theme in ConsensusCriterion.objects.values_list("id", "theme"):
        by_theme.setdefault(theme, []).append(cc_id)
    done_votes = [t for t in votes if rng.random() < 0.3]
    ConsensusVote.objects.bulk_create(
        [
            ConsensusVote(physician_id=t.physician_id, conversation_id=t.conversation_id, consensus_criterion_id=cc, applies=rng.random() < 0.5)
            for t in done_votes
            for cc in by_theme.get(t.conversation.theme, [])
        ],
        batch_size=5000,
    )
    Assignment.objects.filter(id__in=[t.id for t in done_votes]).update(status=Assignment.Status.DONE, completed=now)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    counts = dict(Assignment.objects.values_list("kind").annotate(n=Count("id")).order_by("kind"))
    print(f"tasks: {counts}; {ConsensusVote.objects.count()} votes; built in {time.perf_counter() - start:.0f} s", flush=True)

    clients = []
    for p in physicians[: args.physicians]:
        tasks = {}
        for kind in Assignment.Kind.values:
            row = (
                Assignment.objects.filter(physician=p, kind=kind, status=Assignment.Status.OPEN)
                .order_by("id")
                .values_list("code", "conversation__code")
            )
            tasks[kind] = [(str(code), str(conv)) for code, conv in row[: args.rounds + 2]]
        if not all(tasks.values()):
            continue
        session = SessionStore()
        session[SESSION_KEY] = str(p.user_id)
        session[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
        session[HASH_SESSION_KEY] = p.user.get_session_auth_hash()
        session.create()
        clients.append({"session": session.session_key, "tasks": tasks})
    return {"physicians": clients}


# ---------------------------------------------------------------- the client (second process)


CSRF = re.compile(r'"X-CSRFToken": "([^"]+)"')


class Session:
    """One client: a keep-alive connection and the cookies the server set."""

    def __init__(self, port: int, session_key: str):
        self.port = port
        self.cookies = {"sessionid": session_key}
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)

    def request(self, method: str, path: str, body: str | None = None, headers: dict | None = None) -> tuple[int, str, float]:
        head = {"Cookie": "; ".join(f"{k}={v}" for k, v in self.cookies.items()), "Host": "127.0.0.1"}
        head.update(headers or {})
        start = time.perf_counter()
        try:
            self.conn.request(method, path, body=body, headers=head)
            response = self.conn.getresponse()
        except (http.client.HTTPException, OSError):
            self.conn.close()
            self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
            self.conn.request(method, path, body=body, headers=head)
            response = self.conn.getresponse()
        text = response.read().decode()
        elapsed = time.perf_counter() - start
        for value in response.headers.get_all("Set-Cookie") or []:
            name, _, rest = value.partition("=")
            self.cookies[name.strip()] = rest.split(";", 1)[0]
        return response.status, text, elapsed


def client_main(config_path: str) -> None:
    config = json.loads(Path(config_path).read_text())
    port, rounds, deadline = config["port"], config["rounds"], time.monotonic() + config["seconds"]
    physicians = config["physicians"]
    results: dict[str, list[float]] = {page: [] for page in PAGES}
    errors: list[str] = []
    lock = threading.Lock()

    def run(index: int) -> None:
        mine = physicians[index :: config["clients"]]
        sessions = [Session(port, p["session"]) for p in mine]
        for r in range(-1, rounds):  # round -1 warms the workers up and is not counted
            if time.monotonic() > deadline:
                break
            p, s = mine[r % len(mine)], sessions[r % len(sessions)]
            k = r // len(mine) + 1
            t = p["tasks"]
            label_code = t["label"][k % len(t["label"])][0]
            steps = [
                ("home", "GET", "/", None, {}),
                ("rubric editor", "GET", f"/conversations/{t['rubric'][k % len(t['rubric'])][1]}/rubric/", None, {}),
                ("ideal editor", "GET", f"/conversations/{t['ideal_response'][k % len(t['ideal_response'])][1]}/ideal/", None, {}),
                ("ballot", "GET", f"/conversations/{t['consensus_vote'][k % len(t['consensus_vote'])][1]}/votes/", None, {}),
                ("label item", "GET", f"/labels/{label_code}/", None, {}),
            ]
            token = None
            for page, method, path, body, headers in steps:
                status, text, elapsed = s.request(method, path, body, headers)
                if status != 200:
                    with lock:
                        errors.append(f"{page} {path}: {status}")
                    continue
                if page == "label item":
                    token = CSRF.search(text).group(1)
                if r >= 0:
                    with lock:
                        results[page].append(elapsed)
            if token:
                headers = {"Content-Type": "application/x-www-form-urlencoded", "HX-Request": "true", "X-CSRFToken": token}
                status, text, elapsed = s.request("POST", f"/labels/{label_code}/", "met=yes&comment=", headers)
                if status != 200:
                    errors.append(f"label POST: {status} {text[:200]}")
                elif r >= 0:
                    with lock:
                        results["label (htmx POST)"].append(elapsed)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(config["clients"])]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    print(json.dumps({"results": results, "errors": errors[:20], "n_errors": len(errors), "seconds": time.perf_counter() - start}))


# ---------------------------------------------------------------- the parent


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def _wait_for(port: int, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            conn.request("GET", "/healthz/", headers={"Host": "127.0.0.1"})
            if conn.getresponse().status == 200:
                return
        except OSError:
            pass
        time.sleep(0.2)
    raise SystemExit("gunicorn did not answer /healthz/")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--conversations", type=int, default=5000)
    parser.add_argument("--physicians", type=int, default=200)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=40, help="rounds per client (each round: 6 requests)")
    parser.add_argument("--seconds", type=float, default=180, help="stop the clients after this long")
    parser.add_argument("--workers", type=int, default=max(2, 2 * (os.cpu_count() or 1)))
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--database", default="healthbench_bench_pages")
    parser.add_argument("--client", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.client:
        client_main(args.client)
        return

    data = build(args)
    from django.conf import settings

    database = settings.DATABASES["default"]
    database_url = f"postgres://{database['USER']}@{database['HOST']}:{database['PORT']}/{database['NAME']}"
    with tempfile.TemporaryDirectory() as tmp:
        env = _server_env(database_url, f"{tmp}/static", f"{tmp}/var")
        subprocess.run([sys.executable, "manage.py", "collectstatic", "--noinput", "-v0"], cwd=REPO, env=env, check=True)
        server = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "healthbench_web.wsgi", "--bind", f"127.0.0.1:{args.port}",
             "--workers", str(args.workers), "--threads", str(args.threads), "--worker-class", "gthread",
             "--log-level", "warning"],  # fmt: skip
            cwd=REPO,
            env=env,
        )
        try:
            _wait_for(args.port)
            config = Path(tmp) / "clients.json"
            config.write_text(json.dumps({"port": args.port, "rounds": args.rounds, "seconds": args.seconds, "clients": args.clients, **data}))
            out = subprocess.run(
                [sys.executable, __file__, "--client", str(config)], cwd=REPO, capture_output=True, text=True, timeout=args.seconds + 120
            )
            if out.returncode:
                raise SystemExit(f"client failed:\n{out.stderr}")
            report = json.loads(out.stdout.strip().splitlines()[-1])
        finally:
            server.send_signal(signal.SIGTERM)
            server.wait(timeout=30)

    results = report["results"]
    total = sum(len(v) for v in results.values())
    print(
        f"gunicorn {args.workers} workers x {args.threads} threads, {args.clients} concurrent clients, "
        f"{total} timed requests in {report['seconds']:.1f} s ({total / report['seconds']:.0f} req/s), {report['n_errors']} errors"
    )
    for error in report["errors"]:
        print("  error:", error)
    print(f"{'page':<20} {'n':>5} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8}")
    worst = 0.0
    for page in PAGES:
        values = results[page]
        if not values:
            print(f"{page:<20} {0:>5}")
            continue
        p50, p95 = _percentile(values, 0.5) * 1000, _percentile(values, 0.95) * 1000
        worst = max(worst, p95)
        print(f"{page:<20} {len(values):>5} {p50:8.1f} {p95:8.1f} {max(values) * 1000:8.1f}")
    all_values = [v for values in results.values() for v in values]
    print(f"{'all pages':<20} {len(all_values):>5} {statistics.median(all_values) * 1000:8.1f} {_percentile(all_values, 0.95) * 1000:8.1f}")
    ok = worst <= TARGET_P95_MS and report["n_errors"] == 0
    print(f"target p95 <= {TARGET_P95_MS} ms on every page: " + ("met" if ok else f"MISSED (worst p95 {worst:.0f} ms)"))


if __name__ == "__main__":
    main()
