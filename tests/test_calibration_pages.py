"""The calibrated score in the browser-facing pages, the downloads and the API (issue 31)."""

import csv
import io
import json
from io import StringIO

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client
from django.urls import reverse
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from annotation.models import Assignment, Physician
from annotation.services.labels import label_record
from grading.models import CalibrationSample, Grade, Run
from tests.people import person

pytestmark = pytest.mark.django_db


@pytest.fixture
def demo_run() -> Run:
    call_command("load_demo", password="pw-demo", stdout=StringIO())
    return Run.objects.get(name="demo-run")


def _logged_in(username: str) -> Client:
    client = Client()
    client.force_login(User.objects.get(username=username))
    return client


def _label_all(run: Run) -> None:
    grades = {(g.response_id, g.criterion_id): bool(g.met) for g in Grade.objects.filter(run=run)}
    sample_ids = CalibrationSample.objects.get(run=run).items.values("response_id")
    for task in Assignment.objects.filter(kind="label", status="open", response_id__in=sample_ids):
        label_record(task=task, met=grades[(task.response_id or 0, task.criterion_id)])


def test_draw_in_the_browser_previews_then_confirms(demo_run):
    client = _logged_in("researcher")
    page = client.get(reverse("calibration_detail", args=[demo_run.code]))
    assert page.status_code == 200
    assert b"Draw a calibration sample" in page.content
    url = reverse("calibration_draw", args=[demo_run.code])
    fields = {"size": "6", "seed": "11", "physicians": "1"}
    preview = client.post(url, fields)
    assert preview.status_code == 200
    text = preview.content.decode()
    assert "Preview" in text, text[text.find("<main") :][:3000]
    assert "6 of the run" in text
    assert not CalibrationSample.objects.filter(run=demo_run).exists()  # a preview writes nothing
    drawn = client.post(url, {**fields, "by_theme": "False", "confirm": "1"}, follow=True)
    assert drawn.status_code == 200
    sample = CalibrationSample.objects.get(run=demo_run)
    assert (sample.size, sample.seed, sample.created_by) == (6, 11, "researcher")
    assert b"Drew 6 responses of demo-run" in drawn.content
    assert b"0 of 6" in drawn.content


def test_bad_form_says_what_is_wrong_and_draws_nothing(demo_run):
    client = _logged_in("curator")
    answer = client.post(reverse("calibration_draw", args=[demo_run.code]), {"size": "1", "seed": "-3"})
    assert answer.status_code == 400
    assert b"Nothing was drawn" in answer.content
    assert b"Responses to sample" in answer.content
    assert b"Seed" in answer.content
    assert not CalibrationSample.objects.exists()


def test_physicians_do_not_see_the_calibration(demo_run):
    client = _logged_in("physician")
    assert client.get(reverse("calibration_detail", args=[demo_run.code])).status_code == 403
    answer = client.post(reverse("calibration_draw", args=[demo_run.code]), {"size": "5", "seed": "1"})
    assert answer.status_code == 403


def test_report_page_downloads_and_compare_show_it(demo_run):
    call_command("calibrate", "sample", "demo-run", "--n", "8", "--seed", "2", stdout=StringIO())
    _label_all(demo_run)
    client = _logged_in("researcher")
    report = client.get(reverse("report_detail", args=[demo_run.code]))
    assert b"Physician-calibrated score" in report.content
    assert b"8 of 8 sampled responses scored by physicians" in report.content
    document = json.loads(client.get(reverse("report_json", args=[demo_run.code])).content)
    assert document["calibration"]["progress"]["labelled"] == 8
    assert "metrics" in document
    assert "score" in document
    rows = list(csv.reader(io.StringIO(client.get(reverse("report_csv", args=[demo_run.code])).content.decode())))
    names = [row[0] for row in rows]
    assert "calibration:estimate" in names
    assert "calibration:sample_seed" in names
    own = client.get(reverse("calibration_json", args=[demo_run.code]))
    assert own["Content-Disposition"].endswith('demo-run-calibration.json"')
    assert json.loads(own.content)["overall"]["n"] == 8
    assert client.get(reverse("calibration_csv", args=[demo_run.code])).content.startswith(b"scope,calibrated")
    page = client.get(reverse("calibration_detail", args=[demo_run.code]))
    assert b"No interval: 8 physician-scored responses" in page.content
    other = Run.objects.exclude(pk=demo_run.pk).filter(status__in=["done", "imported"]).first() or demo_run
    compare = client.get(reverse("compare_runs"), {"a": demo_run.code, "b": other.code})
    assert b"Physician-calibrated scores" in compare.content


def test_api_draws_and_reads_the_calibration(demo_run):
    user = person("api-researcher", Physician.Role.RESEARCHER)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    url = f"/api/runs/{demo_run.name}/calibration/"
    missing = client.get(url)
    assert missing.status_code == 404
    assert "POST n and seed" in missing.json()["detail"]
    preview = client.post(url, {"n": 5, "seed": 4, "dry_run": True}, format="json")
    assert preview.status_code == 200
    assert preview.json()["preview"]["size"] == 5
    assert not CalibrationSample.objects.exists()
    created = client.post(url, {"n": 5, "seed": 4}, format="json")
    assert created.status_code == 201
    assert created.json()["design"] == {**created.json()["design"], "size": 5, "seed": 4, "by_theme": False}
    again = client.post(url, {"n": 5, "seed": 4}, format="json")
    assert again.status_code == 400
    assert "never redrawn" in json.dumps(again.json())
    assert client.get(url).json()["progress"]["sampled"] == 5
    assert client.get(f"/api/runs/{demo_run.name}/report/").json()["calibration"]["design"]["seed"] == 4
    bad = client.post(url, {"n": 1, "seed": 4}, format="json")
    assert bad.status_code == 400
    assert "n" in bad.json()


def test_physicians_label_the_sample_on_the_usual_page(demo_run):
    call_command("calibrate", "sample", "demo-run", "--n", "3", "--seed", "21", stdout=StringIO())
    sample_ids = CalibrationSample.objects.get(run=demo_run).items.values("response_id")
    tasks = Assignment.objects.filter(kind="label", status="open", response_id__in=sample_ids)
    assert tasks.exists()
    for task in tasks.select_related("physician__user", "criterion"):
        client = _logged_in(task.physician.user.username)
        url = reverse("label_item", args=[task.code])
        page = client.get(url)
        assert page.status_code == 200
        # Any rubric criterion is labelled there, not only consensus ones; the grader's verdict is never shown.
        first_words = " ".join(task.criterion.text.split()[:3])
        assert first_words in page.content.decode()
        assert b"criteria_met" not in page.content
        assert client.post(url, {"met": "yes"}).status_code in (200, 302)
    assert not tasks.filter(status="open").exists()
    report = json.loads(_logged_in("researcher").get(reverse("calibration_json", args=[demo_run.code])).content)
    assert report["progress"] == {"sampled": 3, "labelled": 3, "complete": True}
