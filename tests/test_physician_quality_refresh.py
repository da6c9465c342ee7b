"""The physician quality figures after a change: a worker computes them (queued by the service
that saved the answer, at most one refresh at a time), the pages meanwhile serve the stored
figures saying that newer answers are being counted, and compute them only when nothing is
stored or no refresh is coming (grading/physicians/stored.py, refresh.py;
annotation/services/quality_refresh.py)."""

from datetime import timedelta

import numpy as np
import pytest
from django.core.cache import cache
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from annotation.models import Assignment, PhysicianLabel, PhysicianQualityStore
from annotation.services import quality_refresh
from grading.physicians import selectors, stored
from grading.physicians.refresh import quality_refresh as refresh
from grading.pipeline.tasks import physician_quality_refresh
from tests.physician_programme import new_label_task, planted_programme
from tests.workspace import client_for, physician

pytestmark = pytest.mark.django_db

OVERVIEW = "/curator/physicians/quality/"


@pytest.fixture(autouse=True)
def _fresh_cache():
    # Figures are cached by a fingerprint of ids and counts, and test databases reuse ids.
    cache.clear()


@pytest.fixture
def programme():
    planted = planted_programme(n_physicians=8, n_labels=800)
    return planted, physician("lead", role="curator")


def _label(who, task: Assignment, met: str, capture) -> list:
    """Answer through the label page as the physician does; the callbacks run at commit."""
    with capture(execute=False) as callbacks:
        assert client_for(who).post(f"/labels/{task.code}/", {"met": met, "comment": ""}).status_code == 302
    return [c for c in callbacks if getattr(c, "func", None) is quality_refresh._send]


def _same(a: selectors.Programme, b: selectors.Programme) -> None:
    assert a.agreement == b.agreement
    assert a.label_seconds == b.label_seconds
    assert a.cant_judge == b.cant_judge
    assert a.reasons == b.reasons
    assert list(a.reasons) == list(b.reasons)
    assert a.flags == b.flags
    assert a.removed == b.removed
    for x, y in (
        (a.labels.labels.item, b.labels.labels.item),
        (a.labels.labels.physician, b.labels.labels.physician),
        (a.labels.labels.label, b.labels.labels.label),
        (a.labels.physician_pk, b.labels.physician_pk),
        (a.labels.response_id, b.labels.response_id),
        (a.times.seconds, b.times.seconds),
        (a.times.completed, b.times.completed),
        (a.times.kind, b.times.kind),
        (a.times.timed, b.times.timed),
    ):
        assert x.dtype == y.dtype
        assert np.array_equal(x, y)
    assert a.labels.labels.physician_ids == b.labels.labels.physician_ids


def test_the_stored_figures_are_the_computed_ones_to_the_bit(programme):
    computed = selectors.programme_computed()
    assert computed.agreement  # something to compare
    kept = stored.unpack(stored.pack(computed))
    _same(kept, computed)
    assert kept.counted_at == computed.counted_at
    # Floats to the bit, not merely equal: the bootstrap intervals as stored bytes.
    f1 = [(a["macro_f1"]["low"], a["macro_f1"]["high"]) for a in computed.agreement.values()]
    f1_kept = [(a["macro_f1"]["low"], a["macro_f1"]["high"]) for a in kept.agreement.values()]
    assert np.array(f1).tobytes() == np.array(f1_kept).tobytes()


def test_after_a_new_label_the_page_serves_the_stored_figures_updating_then_the_new_ones(
    programme, django_capture_on_commit_callbacks
):
    planted, curator = programme
    assert refresh() == "stored"
    before = selectors.programme_computed()
    page = client_for(curator).get(OVERVIEW)
    assert page.context["served"].updating_since is None
    assert "Updating" not in page.content.decode()
    _same(page.context["served"].programme, before)

    who = planted.physicians[5]
    sent = _label(who, new_label_task(who), "no", django_capture_on_commit_callbacks)
    assert len(sent) == 1, "the answer queues one refresh"
    row = PhysicianQualityStore.objects.get()
    assert row.requested_at is not None
    assert row.queued_at is not None

    # Before the worker has run: the stored figures, saying so, and no write.
    reader = client_for(curator)
    with CaptureQueriesContext(connection) as queries:
        page = reader.get(OVERVIEW)
    assert page.status_code == 200
    assert not [q["sql"] for q in queries if q["sql"].lstrip().upper().startswith(("INSERT", "UPDATE", "DELETE"))]
    served = page.context["served"]
    assert served.updating_since == row.requested_at
    assert "Updating…" in page.content.decode()
    _same(served.programme, before)
    own = client_for(who).get(f"/physicians/{who.code}/quality/")
    assert "Updating…" in own.content.decode()

    # The worker's refresh, as the queued task runs it.
    assert physician_quality_refresh.apply().get() == "stored"
    after = selectors.programme_computed()
    assert after.agreement[who.pk] != before.agreement[who.pk]  # the new label counts
    page = client_for(curator).get(OVERVIEW)
    assert page.context["served"].updating_since is None
    assert "Updating" not in page.content.decode()
    _same(page.context["served"].programme, after)
    assert PhysicianQualityStore.objects.get().requested_at is None


def test_answers_while_a_refresh_is_queued_queue_no_other(programme, django_capture_on_commit_callbacks):
    planted, _ = programme
    refresh()
    sent = []
    for who, met in ((planted.physicians[4], "yes"), (planted.physicians[5], "no"), (planted.physicians[6], "yes")):
        sent += _label(who, new_label_task(who), met, django_capture_on_commit_callbacks)
    assert len(sent) == 1
    # Once the refresh has begun, the next answer queues the next one.
    refresh()
    who = planted.physicians[7]
    assert len(_label(who, new_label_task(who), "no", django_capture_on_commit_callbacks)) == 1


def test_with_nothing_stored_the_page_computes_the_figures(programme):
    _, curator = programme
    assert not PhysicianQualityStore.objects.exists()
    page = client_for(curator).get(OVERVIEW)
    assert page.context["served"].updating_since is None
    _same(page.context["served"].programme, selectors.programme_computed())


def test_a_refresh_that_does_not_come_in_time_leaves_the_page_computing(
    programme, settings, django_capture_on_commit_callbacks
):
    planted, curator = programme
    refresh()
    who = planted.physicians[5]
    _label(who, new_label_task(who), "no", django_capture_on_commit_callbacks)  # queued, never run
    late = timezone.now() - timedelta(seconds=settings.PHYSICIAN_QUALITY_UPDATING_SECONDS + 1)
    PhysicianQualityStore.objects.update(requested_at=late, queued_at=late)
    page = client_for(curator).get(OVERVIEW)
    assert page.context["served"].updating_since is None
    assert "Updating" not in page.content.decode()
    _same(page.context["served"].programme, selectors.programme_computed())
    # The next answer queues the refresh again: the first was lost.
    who = planted.physicians[6]
    assert len(_label(who, new_label_task(who), "yes", django_capture_on_commit_callbacks)) == 1


def test_a_change_that_queued_nothing_is_computed_by_the_page(programme):
    # A label written without the services (the admin, a shell): no refresh is coming.
    planted, curator = programme
    refresh()
    task = new_label_task(planted.physicians[5])
    assert task.response_id is not None
    assert task.criterion_id is not None
    PhysicianLabel.objects.create(
        physician=task.physician, response_id=task.response_id, criterion_id=task.criterion_id, met=False
    )
    page = client_for(curator).get(OVERVIEW)
    assert page.context["served"].updating_since is None
    _same(page.context["served"].programme, selectors.programme_computed())


def test_opening_a_task_that_is_not_done_changes_nothing_counted(programme):
    planted, _ = programme
    refresh()
    who = planted.physicians[5]
    task = new_label_task(who)
    fingerprint = selectors.fingerprint()
    assert client_for(who).get(f"/labels/{task.code}/").status_code == 200
    assert selectors.fingerprint() == fingerprint
    assert PhysicianQualityStore.objects.get().requested_at is None


def test_opening_a_done_task_counts_and_queues_a_refresh(programme, django_capture_on_commit_callbacks):
    # The one GET that writes (time on task): opening a done task adds to its active time.
    planted, _ = programme
    refresh()
    who = planted.physicians[5]
    task = new_label_task(who)
    _label(who, task, "yes", django_capture_on_commit_callbacks)
    refresh()
    fingerprint = selectors.fingerprint()
    reader = client_for(who)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        assert reader.get(f"/labels/{task.code}/").status_code == 200
    assert selectors.fingerprint() != fingerprint
    assert [c for c in callbacks if getattr(c, "func", None) is quality_refresh._send]
    assert PhysicianQualityStore.objects.get().requested_at is not None


def test_the_evidence_is_every_item_where_a_peer_differs_with_those_peers_in_label_order(programme):
    planted, _ = programme
    labels = selectors.counted_labels()
    lab = labels.labels
    code = int(np.flatnonzero(labels.physician_pk == planted.sloppy.pk)[0])
    own = {
        i: m for i, p, m in zip(lab.item.tolist(), lab.physician.tolist(), lab.label.tolist(), strict=True) if p == code
    }
    differ: dict[int, list[int]] = {}
    for i, p, m in zip(lab.item.tolist(), lab.physician.tolist(), lab.label.tolist(), strict=True):
        if p != code and i in own and m != own[i]:
            differ.setdefault(i, []).append(int(labels.physician_pk[p]))
    names = selectors.physician_names({p for ps in differ.values() for p in ps})
    expected = [
        {
            "response_id": int(labels.response_id[i]),
            "criterion_id": int(labels.criterion_id[i]),
            "met": own[i],
            "differs_from": [names[p] for p in differ[i]],
        }
        for i in sorted(differ)[:20]
    ]
    assert len(expected) == 20
    assert selectors.disagreements(labels, planted.sloppy.pk, limit=20) == expected


OUTAGE_APP = r"""
import json, time
import django
django.setup()
from django.core.management import call_command
from django.test import Client
from django.test.utils import setup_test_environment
setup_test_environment()
call_command("migrate", verbosity=0)
from annotation.models import PhysicianQualityStore
from annotation.services.labels import label_record
from grading.physicians import selectors
from grading.physicians.refresh import quality_refresh
from tests.physician_programme import new_label_task, planted_programme
from tests.workspace import physician

planted = planted_programme(n_physicians=8, n_labels=800)
curator = physician("lead", role="curator")
stored = quality_refresh()
task = new_label_task(planted.physicians[5])
started = time.monotonic()
label_record(task=task, met=False)
saved = time.monotonic() - started
row = PhysicianQualityStore.objects.get()
client = Client()
client.force_login(curator.user)
page = client.get("/curator/physicians/quality/")
served = page.context["served"]
print(json.dumps({
    "stored": stored,
    "saved_seconds": saved,
    "marks": [row.requested_at is not None, row.queued_at is not None],
    "status": page.status_code,
    "updating": "Updating" in page.content.decode(),
    "current": served.programme.agreement == selectors.programme_computed().agreement,
}))
"""


def test_with_redis_down_an_answer_is_saved_at_once_and_the_page_computes_current_figures(tmp_path):
    # A process configured as a deployment whose Redis (cache and broker) is not running.
    import json
    import os
    import socket
    import subprocess
    import sys

    from tests.conftest import REPO

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed = sock.getsockname()[1]
    environment = {
        k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL", "CACHE_URL", "CELERY_BROKER_URL")
    }
    environment.update(
        VAR_DIR=str(tmp_path / "var"),
        DJANGO_SETTINGS_MODULE="healthbench_web.settings",
        TEST_DATABASE_NAME="",
        REDIS_URL=f"redis://127.0.0.1:{closed}/0",
    )
    done = subprocess.run(
        [sys.executable, "-c", OUTAGE_APP], cwd=REPO, env=environment, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["stored"] == "stored"
    assert out["saved_seconds"] < 2, "the answer does not wait for the broker"
    # Nothing could be queued: no mark says a refresh is coming ...
    assert out["marks"] == [False, False]
    # ... so the page computes the figures, current, without "Updating".
    assert out["status"] == 200
    assert out["updating"] is False
    assert out["current"] is True
    assert "could not queue the physician quality refresh" in done.stderr
