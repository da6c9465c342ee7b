"""Grader comparison: a planted difference in agreement with physicians between two runs on
the same labelled items is what the maths, the command and the page show; and the one-step
launch grades a run's labelled items again in each chosen mode."""

import io
import json

import numpy as np
import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.urls import reverse

from annotation.models import Physician
from grading.metaeval.agreement import MetaEvalLabels
from grading.metaeval.compare import graders_compare
from grading.metaeval.grader_comparison import paired_f1_differences
from grading.metaeval.grader_labels import grader_labels_import
from grading.metaeval.importer import meta_eval_import
from grading.models import Run
from tests.endpoints import endpoint_on
from tests.metaeval_rows import CATEGORY, OTHER_CATEGORY, grader_rows_for, lines, meta_row

pytest_plugins = ["tests.llm_server"]

N_ITEMS = 40


def planted() -> tuple[list[bool], list[bool], list[bool]]:
    """Physicians' unanimous verdicts; grader A agrees on every item, B is wrong on 10 of 40
    (5 met called not met, 5 not met called met): pairwise macro F1 1.0 and 0.75."""
    truth = [i % 2 == 0 for i in range(N_ITEMS)]
    flipped = set(range(0, 20, 2)[:5]) | set(range(1, 21, 2)[:5])
    return truth, truth, [(not v) if i in flipped else v for i, v in enumerate(truth)]


def test_the_paired_difference_of_a_planted_gap_is_its_size_and_excludes_zero():
    truth, a, b = planted()
    labels = MetaEvalLabels(
        item=np.repeat(np.arange(N_ITEMS), 3),
        category=np.repeat(np.arange(N_ITEMS) % 2, 3),
        physician=np.tile(np.arange(3), N_ITEMS),
        label=np.repeat(truth, 3),
        category_names=("one", "two"),
        physician_ids=("x", "y", "z"),
        n_items=N_ITEMS,
    )
    differences = paired_f1_differences(labels, np.array(a, float), np.array(b, float), seed=0)
    overall = differences[""]
    assert overall["value"] == pytest.approx(-0.25)
    assert overall["low"] is not None
    assert overall["high"] is not None
    assert overall["high"] < 0 < 1 + overall["low"]
    assert overall["n_items"] == N_ITEMS
    assert paired_f1_differences(labels, np.array(a, float), np.array(a, float), seed=0)[""]["value"] == 0
    # The same draw for both: a grader against itself never differs in any resample.
    same = paired_f1_differences(labels, np.array(b, float), np.array(b, float), seed=1)[""]
    assert (same["low"], same["high"]) == (0, 0)


@pytest.fixture
def two_graders(db):
    truth, a, b = planted()
    rows = [
        meta_row(
            f"p-{i // 2}",
            f"c-{i}",
            (CATEGORY, OTHER_CATEGORY)[i % 4 // 2],
            labels=(truth[i],) * 3,
            physicians=(1, 2, 3),
            prompt=[{"content": f"Question {i // 2}?", "role": "user"}],
        )
        for i in range(N_ITEMS)
    ]
    meta_eval_import(lines=lines(*rows))
    grader_labels_import(lines=lines(*grader_rows_for(rows, a)), run_name="agrees")
    grader_labels_import(lines=lines(*grader_rows_for(rows, b)), run_name="flips-a-quarter")
    return Run.objects.get(name="agrees"), Run.objects.get(name="flips-a-quarter")


def test_the_document_shows_the_planted_difference(two_graders):
    document = graders_compare(runs=list(two_graders))
    agrees, flips = document["runs"]
    assert document["items"] == N_ITEMS
    assert agrees["macro_f1"]["overall"]["value"] == pytest.approx(1.0)
    assert flips["macro_f1"]["overall"]["value"] == pytest.approx(0.75)
    assert flips["kappa"]["value"] == pytest.approx(0.5)
    difference = flips["f1_difference_vs_first"]["overall"]
    assert difference["value"] == pytest.approx(-0.25)
    assert difference["high"] < 0
    assert set(agrees["macro_f1"]) == {"overall", CATEGORY, OTHER_CATEGORY}
    assert "f1_difference_vs_first" not in agrees


def test_compare_graders_prints_it_and_refuses_a_single_run(two_graders):
    out = io.StringIO()
    call_command("compare_graders", "agrees", "flips-a-quarter", stdout=out)
    text = out.getvalue()
    assert "flips-a-quarter" in text
    assert "macro F1 0.750" in text
    assert "vs the first -0.250" in text
    out = io.StringIO()
    call_command("compare_graders", "agrees", "flips-a-quarter", "--format", "json", stdout=out)
    assert json.loads(out.getvalue())["runs"][1]["macro_f1"]["overall"]["value"] == pytest.approx(0.75)
    with pytest.raises(CommandError, match="compare two or more runs"):
        call_command("compare_graders", "agrees")
    with pytest.raises(CommandError, match="no run named 'nope'"):
        call_command("compare_graders", "agrees", "nope")


def _researcher(client):
    user = User.objects.create_user("researcher")
    Physician.objects.create(user=user, role=Physician.Role.RESEARCHER)
    client.force_login(user)


def test_the_page_shows_the_planted_difference(two_graders, client):
    _researcher(client)
    first, second = two_graders
    page = client.get(reverse("graders_comparison"), {"run": [first.code, second.code]})
    assert page.status_code == 200
    html = page.content.decode()
    overall = html[html.index('id="graders-overall"') : html.index('id="graders-categories"')]
    row = overall[overall.index("flips-a-quarter") :]
    assert "0.750" in row
    assert "-0.250" in row
    assert "1.000" in overall[overall.index("agrees") :]


def test_a_physician_cannot_open_the_comparison(two_graders, client):
    user = User.objects.create_user("doctor")
    Physician.objects.create(user=user, role=Physician.Role.PHYSICIAN)
    client.force_login(user)
    first, second = two_graders
    assert client.get(reverse("graders_comparison"), {"run": [first.code, second.code]}).status_code == 403


@pytest.mark.usefixtures("eager_tasks")
def test_one_step_launches_the_labelled_items_in_each_mode(two_graders, client, llm_server):
    _researcher(client)
    first, _ = two_graders
    endpoint_on(llm_server)
    response = client.post(
        reverse("graders_comparison_launch"),
        {
            "source": first.code,
            "grader": "test-grader",
            "modes": ["per-criterion", "per-response"],
            "explanation_length": "words",
        },
    )
    assert response.status_code == 302
    launched = Run.objects.exclude(id__in=[r.id for r in two_graders]).order_by("id")
    assert [r.grader_config.grading_mode for r in launched] == ["per-criterion", "per-response"]
    assert all(r.responses_from_id == first.id for r in launched)
    assert all(r.total_items == N_ITEMS for r in launched)
    assert str(first.code) in response["Location"]
    page = client.get(response["Location"])
    assert page.status_code == 200
    assert "per-response" in page.content.decode()
