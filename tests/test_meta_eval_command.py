"""meta_eval NAME: the grader's agreement with physicians, read from the database."""

import csv
import io
import json
import random
import re
from io import StringIO

import numpy as np
import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command

from annotation.models import Criterion, Physician
from grading.metaeval import agreement as metaeval
from grading.metaeval.grader_labels import grader_labels_import
from grading.metaeval.importer import meta_eval_import
from grading.metaeval.report import CSV_COLUMNS
from grading.models import Grade, Response, Run
from tests.conftest import FIXTURES, sample_file
from tests.metaeval_rows import CATEGORY, OTHER_CATEGORY, grader_rows_for, lines, meta_row, physician

pytestmark = pytest.mark.django_db

CATEGORIES = [CATEGORY, OTHER_CATEGORY, "cluster:context_seeking_test_precise"]


def random_rows(n_items=40, seed=3) -> list[dict]:
    rng = random.Random(seed)
    rows = []
    for i in range(n_items):
        doctors = rng.sample(range(8), rng.randint(1, 4))
        rows.append(
            meta_row(
                f"p-{i % 7}",
                f"c-{i}",
                CATEGORIES[i % 3],
                labels=tuple(rng.random() < 0.6 for _ in doctors),
                physicians=tuple(doctors),
                prompt=[{"content": f"Question {i % 7}?", "role": "user"}],
            )
        )
    return rows


def load(rows: list[dict], verdicts: list[bool], name="grader-a") -> Run:
    meta_eval_import(lines=lines(*rows))
    return grader_labels_import(lines=lines(*grader_rows_for(rows, verdicts)), run_name=name).run


def meta_eval_json(name="grader-a", **options) -> dict:
    out = StringIO()
    call_command("meta_eval", name, stdout=out, **options)
    return json.loads(out.getvalue())


def direct(rows: list[dict], verdicts: list) -> tuple[dict, dict]:
    labels = metaeval.labels_from_rows(rows)
    return metaeval.grader_agreement(labels, verdicts), metaeval.physician_agreement(labels)


def test_model_and_physicians_equal_a_direct_computation_on_the_same_labels():
    rows = random_rows()
    verdicts = [random.Random(i).random() < 0.5 for i in range(len(rows))]
    load(rows, verdicts)
    document = meta_eval_json()
    model, physicians = direct(rows, verdicts)
    assert document["model"] == model
    assert document["physicians"] == physicians
    assert document["coverage"]["items"] == len(rows)
    assert set(document["intervals"]) <= set(model)
    assert document["ranks"]["pairwise_model_f1_balanced"]["n_physicians"] == len(
        physicians["pairwise_physician_f1_balanced"]
    )


def test_the_real_sample_round_trips_to_the_references_figures(tmp_path):
    path = sample_file("meta_eval_sample.jsonl")
    golden = json.loads((FIXTURES / "metaeval" / "meta_eval_sample.json").read_text())
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    assert [r["completion_id"] for r in rows] == golden["completion_ids"]
    call_command("import_meta_eval", path, stdout=StringIO(), stderr=StringIO())
    labels = tmp_path / "grader.jsonl"
    labels.write_text("".join(json.dumps(r) + "\n" for r in grader_rows_for(rows, golden["grader"])))
    call_command("import_grader_labels", labels, name="sample", stdout=StringIO())
    document = meta_eval_json("sample")
    # The reference's output, stored by tests/test_metaeval.py's fixture: [n, value] pairs.
    assert {k: (m["n"], pytest.approx(m["value"], abs=1e-12)) for k, m in document["model"].items()} == {
        k: (n, v) for k, (n, v) in golden["model"].items()
    }
    expected = {
        name: {golden["physician_ids"][int(i)]: (n, v) for i, (n, v) in per.items()}
        for name, per in golden["physician"].items()
    }
    got = {
        name: {p: (m["n"], pytest.approx(m["value"], abs=1e-12)) for p, m in per.items()}
        for name, per in document["physicians"].items()
    }
    assert got == expected


def test_a_category_where_one_class_never_occurs_reports_only_that_class():
    rows = [meta_row("p-1", f"c-{i}", OTHER_CATEGORY, (True, True), (0, 1)) for i in range(3)]
    rows += [meta_row("p-1", f"c-{i}", CATEGORY, (i % 2 == 0, True), (0, 1)) for i in range(4)]
    verdicts = [True] * 3 + [True, False, True, False]
    load(rows, verdicts)
    document = meta_eval_json()
    only_met = {k.split(": ")[1] for k in document["model"] if k.startswith(OTHER_CATEGORY)}
    assert only_met == {"pairwise_model_precision_pos", "pairwise_model_recall_pos", "pairwise_model_f1_pos"}
    assert f"{OTHER_CATEGORY}: pairwise_model_f1_balanced" not in document["intervals"]
    assert f"{OTHER_CATEGORY}: pairwise_model_f1_balanced" not in document["ranks"]
    assert document["model"] == direct(rows, verdicts)[0]


def test_a_removed_physicians_labels_are_left_out():
    rows = random_rows(seed=5)
    verdicts = [i % 3 == 0 for i in range(len(rows))]
    load(rows, verdicts)
    Physician.objects.filter(anonymized_id=physician(2)).update(status=Physician.Status.REMOVED)
    document = meta_eval_json()
    kept = []
    for row in rows:
        pairs = [
            (p, b)
            for p, b in zip(row["anonymized_physician_ids"], row["binary_labels"], strict=True)
            if p != physician(2)
        ]
        if pairs:
            kept.append(dict(row, anonymized_physician_ids=[p for p, _ in pairs], binary_labels=[b for _, b in pairs]))
    model, physicians = direct(
        kept,
        [
            v
            for r, v in zip(rows, verdicts, strict=True)
            if any(p != physician(2) for p in r["anonymized_physician_ids"])
        ],
    )
    assert physician(2) not in json.dumps(document["physicians"])
    assert document["model"] == model
    assert document["physicians"] == physicians


def test_failed_grades_count_as_no_grader_label():
    rows = random_rows(n_items=12, seed=9)
    meta_eval_import(lines=lines(*rows))
    run = Run.objects.create(plan=Run.Plan.STORED, name="live-run", status=Run.Status.DONE)
    verdicts: list = []
    for i, row in enumerate(rows):
        response = Response.objects.get(completion_id=row["completion_id"])
        criterion = Criterion.objects.get(
            conversation=response.conversation, consensus_criterion__cluster=row["category"]
        )
        failed = i % 4 == 0
        verdicts.append(None if failed else i % 2 == 0)
        Grade.objects.create(
            run=run,
            response=response,
            criterion=criterion,
            position=0,
            criterion_text=criterion.text,
            points=5,
            status=Grade.Status.FAILED if failed else Grade.Status.GRADED,
            met=None if failed else i % 2 == 0,
        )
    document = meta_eval_json("live-run")
    assert document["coverage"]["items_without_grader_label"] == 3
    model, physicians = direct(rows, verdicts)
    assert document["model"] == model
    assert document["physicians"] == physicians


def test_only_the_items_a_run_graded_are_compared():
    rows = random_rows(n_items=30, seed=11)
    meta_eval_import(lines=lines(*rows))
    graded = rows[:10]
    grader_labels_import(lines=lines(*grader_rows_for(graded, [True, False] * 5)), run_name="partial")
    document = meta_eval_json("partial")
    assert document["coverage"]["items"] == 10
    assert (document["model"], document["physicians"]) == direct(graded, [True, False] * 5)


def test_a_physician_with_a_login_is_named_by_username():
    rows = [meta_row("p-1", f"c-{i}", CATEGORY, (i % 2 == 0, True), (0, 1)) for i in range(4)]
    load(rows, [True] * 4)
    Physician.objects.filter(anonymized_id=physician(0)).update(user=User.objects.create_user("dr-ada"))
    names = {p for per in meta_eval_json()["physicians"].values() for p in per}
    assert "dr-ada" in names
    assert physician(0) not in names


def test_disagreements_name_the_item_the_grader_label_and_the_tallies():
    rows = [
        meta_row("p-1", "c-1", CATEGORY, (False, False, True), (0, 1, 2)),
        meta_row("p-1", "c-2", CATEGORY, (True, False), (0, 1)),
    ]
    load(rows, [True, False])
    document = meta_eval_json()
    assert document["disagreements"] == [
        {"prompt_id": "p-1", "completion_id": "c-1", "category": CATEGORY, "grader": True, "n_met": 1, "n_not_met": 2}
    ]
    assert document["ties"] == [
        {"prompt_id": "p-1", "completion_id": "c-2", "category": CATEGORY, "grader": False, "n_met": 1, "n_not_met": 1}
    ]


def test_the_csv_has_one_row_per_grader_metric_with_interval_and_rank_beside_the_macro_f1(tmp_path):
    rows = random_rows()
    load(rows, [i % 2 == 0 for i in range(len(rows))])
    out = tmp_path / "report.csv"
    call_command("meta_eval", "grader-a", format="csv", out=out, stderr=StringIO())
    table = list(csv.DictReader(io.StringIO(out.read_text())))
    document = meta_eval_json()
    assert list(table[0]) == [name for name, _ in CSV_COLUMNS]
    chance_rows = [r for r in table if r["metric"] in ("cohen_kappa", "krippendorff_alpha")]
    review_rows = [r for r in table if r["metric"].startswith("items_")]
    # One count per scope (overall and each criterion) for each of the review's two causes.
    assert len(review_rows) == 2 * (1 + len(CATEGORIES))
    assert set(document["review"]) == {"physicians_split", "grader_against_agreeing_physicians"}
    split = document["review"]["physicians_split"]
    assert split["counts"]["overall"] == len(split["items"]) == sum(split["counts"][c] for c in CATEGORIES)
    csv_split = next(r for r in review_rows if r["scope"] == "overall" and r["metric"] == "items_physicians_split")
    assert int(csv_split["value"]) == split["counts"]["overall"]
    assert len(table) - len(chance_rows) - len(review_rows) == len(document["model"])
    assert len(chance_rows) == len(document["cohen_kappa"]) + len(document["krippendorff_alpha"]) == 2 * 4
    overall = next(r for r in table if r["scope"] == "overall" and r["metric"] == "pairwise_model_f1_balanced")
    interval = document["intervals"]["pairwise_model_f1_balanced"]
    assert float(overall["value"]) == document["model"]["pairwise_model_f1_balanced"]["value"]
    assert (float(overall["ci_low"]), float(overall["ci_high"])) == (interval["low"], interval["high"])
    assert int(overall["rank"]) == document["ranks"]["pairwise_model_f1_balanced"]["rank"]
    precision = next(r for r in table if r["scope"] == CATEGORY and r["metric"] == "pairwise_model_precision_pos")
    assert precision["ci_low"] == precision["rank"] == ""


def test_kappa_and_alpha_in_the_report_equal_scikit_learn_and_the_krippendorff_package(tmp_path):
    from tests.test_chance_agreement import package_alpha, sklearn_kappa

    pytest.importorskip("sklearn")
    rows = random_rows(n_items=60)
    verdicts = [i % 3 != 0 for i in range(len(rows))]
    load(rows, verdicts)
    document = meta_eval_json()
    # The file's rows as the agreement code reads them: one row per item, the grader per item.
    file_rows = [
        {
            "category": r["category"],
            "binary_labels": r["binary_labels"],
            "anonymized_physician_ids": r["anonymized_physician_ids"],
        }
        for r in rows
    ]
    grader = np.array([float(v) for v in verdicts])
    assert document["cohen_kappa"]["cohen_kappa"]["value"] == pytest.approx(sklearn_kappa(file_rows, grader), abs=1e-12)
    assert document["krippendorff_alpha"]["krippendorff_alpha"]["value"] == pytest.approx(
        package_alpha(file_rows), abs=1e-12
    )
    for category in CATEGORIES:
        kappa = document["cohen_kappa"][f"{category}: cohen_kappa"]
        assert kappa["value"] == pytest.approx(sklearn_kappa(file_rows, grader, category), abs=1e-12)
        assert kappa["low"] <= kappa["value"] <= kappa["high"]
    table = list(csv.DictReader(io.StringIO(call_csv(tmp_path))))
    row = next(r for r in table if r["scope"] == "overall" and r["metric"] == "krippendorff_alpha")
    assert float(row["value"]) == document["krippendorff_alpha"]["krippendorff_alpha"]["value"]


def call_csv(tmp_path) -> str:
    out = tmp_path / "report.csv"
    call_command("meta_eval", "grader-a", format="csv", out=out, stderr=StringIO())
    return out.read_text()


def test_the_same_seed_gives_the_same_intervals():
    rows = random_rows()
    load(rows, [i % 3 == 0 for i in range(len(rows))])
    assert meta_eval_json(seed=4)["intervals"] == meta_eval_json(seed=4)["intervals"]
    assert meta_eval_json(seed=4)["settings"]["seed"] == 4


def test_a_run_without_labelled_items_gives_an_empty_report():
    Run.objects.create(plan=Run.Plan.STORED, name="empty")
    document = meta_eval_json("empty")
    assert document["coverage"]["items"] == 0
    assert document["model"] == document["physicians"] == document["intervals"] == {}
    assert document["disagreements"] == []


def test_it_names_an_unknown_run():
    with pytest.raises(CommandError, match="no run named 'nope'"):
        call_command("meta_eval", "nope")


def test_labels_from_the_database_build_valid_arrays_at_scale():
    rows = random_rows(n_items=300, seed=1)
    load(rows, [bool(b) for b in np.random.default_rng(0).integers(0, 2, size=300)])
    assert meta_eval_json()["coverage"]["labels"] == sum(len(r["binary_labels"]) for r in rows)


def test_the_report_says_how_many_repeated_physician_labels_were_merged():
    rows = [meta_row("p-1", "c-1", labels=(True, False, True), physicians=(0, 1, 0)), meta_row("p-1", "c-2")]
    load(rows, [True, False])
    document = meta_eval_json()
    assert document["coverage"]["labels_merged"] == 1
    # The reference counts the repeat as one more pair: 3 pairs on the first item, ours 2.
    assert document["model"]["pairwise_model_precision_pos"]["n"] == 2


def test_the_help_names_every_part_of_the_document_and_only_files_that_exist():
    from grading.management.commands.meta_eval import Command
    from grading.metaeval.report import META_EVAL_SCHEMA
    from tests.conftest import REPO

    text = Command().create_parser("manage.py", "meta_eval").format_help()
    for key in (key for key in META_EVAL_SCHEMA if "." not in key and key != "run"):
        assert f"'{key}'" in text, key
    for path in re.findall(r"\b(?:grading|annotation)/[\w/]+\.py", text):
        assert (REPO / path).exists(), path
