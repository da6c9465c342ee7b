"""The pages benchmark's data: a paper-size programme built with the project's own code.

5,000 conversations from bench/generate.py through the real importer, two sampled responses
each, 200 physicians, and their tasks given out by the real assignment service; about a third
of the votes already cast. Returns, per physician, a session key and the URLs of open tasks.
"""

import random
import time

# Sessions are signed with the server's SECRET_KEY: the benchmark's server is given this one.
SECRET_KEY = "pages-bench-not-a-secret-" + "x" * 40
SPECIALTIES = [
    "Emergency medicine",
    "Family medicine",
    "Internal medicine",
    "Pediatrics",
    "Cardiology",
    "Psychiatry",
    "Obstetrics",
    "Public health",
]
LANGUAGES = ["en", "es", "fr", "pt", "sw", "hi", "ar", "zh"]


def build(*, database: str, conversations: int, physicians: int, rounds: int) -> dict:
    """Create the database and return what the clients need: per physician, session and task URLs."""
    from bench._db import fresh_postgres

    start = time.perf_counter()
    fresh_postgres(database)
    from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY
    from django.contrib.auth.hashers import make_password
    from django.contrib.auth.models import User
    from django.contrib.sessions.backends.db import SessionStore
    from django.db import connection
    from django.db.models import Count

    from annotation.formats.importer import import_healthbench_lines
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
    lines = healthbench_lines(conversations)
    import_healthbench_lines((line.encode() for line in lines), subset_name="bench")
    print(f"data: {Conversation.objects.count()} conversations, {Criterion.objects.count()} criteria", flush=True)

    password = make_password(None)  # unusable: clients use sessions made here, not the login form
    users = User.objects.bulk_create(User(username=f"doc{n:03d}", password=password) for n in range(physicians))
    people = Physician.objects.bulk_create(
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
        [
            "code",
            "conversation_id",
            "text",
            "source",
            "model_name",
            "parameters",
            "sample_index",
            "completion_id",
            "created",
        ],
        [
            (
                next(codes),
                cid,
                f"Sample {k} for conversation {cid}. " + "Rest, fluids and review. " * 40,
                "sampled",
                "bench-model",
                "{}",
                k,
                f"bench:{cid}:{k}",
                now,
            )
            for cid in ids
            for k in range(2)
        ],
    )
    half = len(ids) // 2
    assignments_create(
        kind=Assignment.Kind.RUBRIC, conversation_ids=ids, physicians=people, per_item=1, assigned_by=None
    )
    assignments_create(
        kind=Assignment.Kind.CONSENSUS_VOTE,
        conversation_ids=ids[:half],
        physicians=people,
        per_item=2,
        assigned_by=None,
    )
    for chunk, condition in (
        (ids[:half:2], IdealResponse.Condition.WITH_REFERENCE),
        (ids[1:half:2], IdealResponse.Condition.NO_REFERENCE),
    ):
        assignments_create(
            kind=Assignment.Kind.IDEAL_RESPONSE,
            conversation_ids=chunk,
            physicians=people,
            per_item=1,
            assigned_by=None,
            condition=condition,
        )
    assignments_create(
        kind=Assignment.Kind.LABEL, conversation_ids=ids, physicians=people, per_item=2, assigned_by=None
    )
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
            ConsensusVote(
                physician_id=t.physician_id,
                conversation_id=t.conversation_id,
                consensus_criterion_id=cc,
                applies=rng.random() < 0.5,
            )
            for t in done_votes
            for cc in by_theme.get(t.conversation.theme, [])
        ],
        batch_size=5000,
    )
    Assignment.objects.filter(id__in=[t.id for t in done_votes]).update(status=Assignment.Status.DONE, completed=now)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    counts = dict(Assignment.objects.values_list("kind").annotate(n=Count("id")).order_by("kind"))
    print(
        f"tasks: {counts}; {ConsensusVote.objects.count()} votes; built in {time.perf_counter() - start:.0f} s",
        flush=True,
    )

    clients = []
    for p in people:
        tasks = {}
        for kind in Assignment.Kind.values:
            row = (
                Assignment.objects.filter(physician=p, kind=kind, status=Assignment.Status.OPEN)
                .order_by("id")
                .values_list("code", "conversation__code")
            )
            tasks[kind] = [(str(code), str(conv)) for code, conv in row[: rounds + 2]]
        if not all(tasks.values()):
            continue
        session = SessionStore()
        session[SESSION_KEY] = str(p.user_id)
        session[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
        session[HASH_SESSION_KEY] = p.user.get_session_auth_hash()
        session.create()
        clients.append({"session": session.session_key, "tasks": tasks})
    return {"physicians": clients}
