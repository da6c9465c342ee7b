"""Stored grader templates: the reference's read from the user's own copy of simple-evals
(recognised by its hash when SIMPLE_EVALS_DIR names a checkout), others from a file; runs
graded with one record its sha256; the compare page warns when two runs were graded
differently."""

import tracemalloc
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.test import Client
from django.urls import reverse

from annotation.models import Physician
from grading.models import Endpoint, GraderTemplate, Run
from grading.pipeline.batches import batch_run
from grading.pipeline.grader_prompt import template_hash
from grading.reference_grader import PUBLISHED_TEMPLATE_SHA256
from tests.grading_data import imported_run
from tests.people import person
from tests.simple_evals import simple_evals_dir

pytest_plugins = ["tests.llm_server"]
pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fast_retries")]

# Our own words, in the shape of the reference's module: a triple-quoted string with .strip().
OWN_TEMPLATE = "Judge the last reply.\n\n<<conversation>>\n\nItem: <<rubric_item>>\n\nAnswer in JSON."
MODULE = (
    f'"""A stand-in for healthbench_eval.py."""\n\nimport os\n\nGRADER_TEMPLATE = """\n{OWN_TEMPLATE}\n""".strip()\n'
)


def run_command(*args) -> str:
    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def fake_copy(root: Path, text: str = MODULE) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "healthbench_eval.py").write_text(text)
    return root


def test_a_checkouts_template_is_stored_under_a_name_with_its_hash(tmp_path):
    said = run_command("grader_template", "import", "--simple-evals", str(fake_copy(tmp_path / "checkout")))
    stored = GraderTemplate.objects.get(name="simple-evals")
    assert stored.text == OWN_TEMPLATE
    assert stored.sha256 == template_hash(OWN_TEMPLATE)
    assert "custom grader prompt" in said
    assert stored.sha256 in said
    assert "simple-evals" in run_command("grader_template", "list")


def test_an_installed_copy_is_found_in_its_package_folder(tmp_path):
    fake_copy(tmp_path / "site-packages" / "simple_evals")
    run_command("grader_template", "import", "--simple-evals", str(tmp_path / "site-packages"), "--name", "installed")
    assert GraderTemplate.objects.get(name="installed").text == OWN_TEMPLATE


@pytest.mark.parametrize(
    ("module", "message"),
    [
        (None, "holds no healthbench_eval.py"),
        ("X = 1\n", "assigns no GRADER_TEMPLATE"),
        ("GRADER_TEMPLATE = make()\n", "is not a plain string"),
        ('GRADER_TEMPLATE = "no placeholders"\n', "lacks the placeholder(s) <<conversation>>, <<rubric_item>>"),
        ("def broken(:\n", "cannot read"),
    ],
)
def test_a_copy_without_a_usable_template_is_refused_and_nothing_stored(tmp_path, module, message):
    root = tmp_path / "copy"
    root.mkdir()
    if module is not None:
        fake_copy(root, module)
    with pytest.raises(CommandError, match=message.replace("(", r"\(").replace(")", r"\)")):
        run_command("grader_template", "import", "--simple-evals", str(root))
    assert not GraderTemplate.objects.exists()


def test_another_text_under_a_taken_name_is_refused_the_same_is_a_no_op(tmp_path):
    run_command("grader_template", "import", "--simple-evals", str(fake_copy(tmp_path / "a")))
    assert "Already stored" in run_command("grader_template", "import", "--simple-evals", str(tmp_path / "a"))
    other = MODULE.replace("Judge the last reply.", "Judge the final reply.")
    with pytest.raises(CommandError, match="a different template is already stored as 'simple-evals'"):
        run_command("grader_template", "import", "--simple-evals", str(fake_copy(tmp_path / "b", other)))
    assert GraderTemplate.objects.count() == 1


def test_a_file_template_is_stored_too_and_the_list_says_when_there_are_none(tmp_path):
    assert "no grader templates yet" in run_command("grader_template", "list")
    path = tmp_path / "t.txt"
    path.write_text(OWN_TEMPLATE)
    run_command("grader_template", "import", "--file", str(path), "--name", "mine")
    assert GraderTemplate.objects.get(name="mine").sha256 == template_hash(OWN_TEMPLATE)


# --- files that are too large or too deep ------------------------------------------------------------


def _peak_bytes_while(action) -> int:
    tracemalloc.start()
    try:
        action()
    finally:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    return peak


def test_a_huge_eval_file_is_refused_by_its_size_before_it_is_read(tmp_path):
    root = tmp_path / "copy"
    root.mkdir()
    with open(root / "healthbench_eval.py", "wb") as handle:
        handle.truncate(300_000_000)  # sparse: 300 MB on paper, nothing on disk

    def attempt():
        refusal = r"it is 300\.0 MB; simple-evals' healthbench_eval\.py is at most 1\.0 MB"
        with pytest.raises(CommandError, match=refusal):
            run_command("grader_template", "import", "--simple-evals", str(root))

    assert _peak_bytes_while(attempt) < 5_000_000
    assert not GraderTemplate.objects.exists()


@pytest.mark.parametrize(
    "module",
    [
        "GRADER_TEMPLATE = " + "-" * 400_000 + "1\n",
        "GRADER_TEMPLATE = " + "not " * 200_000 + "1\n",
        "GRADER_TEMPLATE = x" + ".y" * 300_000 + "\n",
        "GRADER_TEMPLATE = 1" + "+1" * 300_000 + "\n",
        "GRADER_TEMPLATE = " + "[" * 100_000 + "]" * 100_000 + "\n",
    ],
    ids=["unary", "not", "attributes", "sum", "brackets"],
)
def test_a_deeply_nested_eval_file_is_refused_with_a_sentence(tmp_path, module):
    root = fake_copy(tmp_path / "copy", module)
    with pytest.raises(CommandError, match=r"cannot read .*healthbench_eval\.py: (it nests deeper|too many nested)"):
        run_command("grader_template", "import", "--simple-evals", str(root))
    assert not GraderTemplate.objects.exists()


def test_a_long_chain_of_strips_is_no_plain_string(tmp_path):
    root = fake_copy(tmp_path / "copy", 'GRADER_TEMPLATE = "<<conversation>> <<rubric_item>>"' + ".strip()" * 50_000)
    with pytest.raises(CommandError, match=r"(is not a plain string|nests deeper)"):
        run_command("grader_template", "import", "--simple-evals", str(root))
    # A few are read as the module would compute them.
    fake_copy(tmp_path / "few", 'GRADER_TEMPLATE = "  <<conversation>> <<rubric_item>>  ".strip().lstrip()\n')
    run_command("grader_template", "import", "--simple-evals", str(tmp_path / "few"))
    assert GraderTemplate.objects.get().text == "<<conversation>> <<rubric_item>>"


def test_a_template_file_is_refused_by_its_size_and_so_is_a_file_without_one(tmp_path):
    path = tmp_path / "big.txt"
    path.write_text(OWN_TEMPLATE + " " * 300_000)
    with pytest.raises(CommandError, match=r"big\.txt: it is 300 KB; a grader template file is at most 262 KB"):
        run_command("grader_template", "import", "--file", str(path), "--name", "big")
    # A device reports no size: it is read no further than the limit.
    with pytest.raises(CommandError, match=r"/dev/zero: it holds more than 262 KB"):
        run_command("grader_template", "import", "--file", "/dev/zero", "--name", "zero")
    assert not GraderTemplate.objects.exists()


def grade_with(server, *, name: str, template: str | None = None, **endpoint) -> Run:
    source = Run.objects.filter(name="source").first() or imported_run(
        name="source", conversations=1, samples=1, n_criteria=2
    )
    Endpoint.objects.get_or_create(
        name=f"grader-{name}", defaults={"base_url": server.url, "model": "grader", "key_variable": ""} | endpoint
    )
    args = ["grade", "--name", name, "--grader", f"grader-{name}", "--responses-from", source.name]
    if template:
        args += ["--template", template]
    run_command(*args)
    run = Run.objects.get(name=name)
    for batch_id in run.batches.values_list("id", flat=True):
        batch_run(batch_id=batch_id)
    run.refresh_from_db()
    return run


def test_a_run_graded_with_a_stored_template_records_its_hash(llm_server, tmp_path):
    run_command("grader_template", "import", "--simple-evals", str(fake_copy(tmp_path / "c")), "--name", "own")
    run = grade_with(llm_server, name="with-own", template="own")
    assert run.status == Run.Status.DONE, run.error
    assert run.grader_config.prompt_hash == template_hash(OWN_TEMPLATE)
    assert "Judge the last reply." in llm_server.requests[-1][1]["messages"][-1]["content"]
    with pytest.raises(CommandError, match="no grader template named 'nope'"):
        run_command(
            "grade", "--name", "x", "--grader", "grader-with-own", "--responses-from", "source", "--template", "nope"
        )


def test_the_reference_template_from_a_checkout_is_recognised_by_its_hash(llm_server):
    checkout = str(simple_evals_dir())
    said = run_command("grader_template", "import", "--simple-evals", checkout)
    assert "reference grader prompt" in said
    assert GraderTemplate.objects.get(name="simple-evals").sha256 == PUBLISHED_TEMPLATE_SHA256
    run = grade_with(llm_server, name="reference-prompt", template="simple-evals")
    assert run.status == Run.Status.DONE, run.error
    from grading.reports.report import run_report

    grader = run_report(run=run).data["grader"]
    assert grader["prompt"] == "reference"
    assert grader["prompt_label"] == "reference grader prompt"


def test_the_compare_page_warns_when_graders_or_prompts_differ(llm_server, tmp_path):
    run_command("grader_template", "import", "--simple-evals", str(fake_copy(tmp_path / "d")), "--name", "own")
    ours = grade_with(llm_server, name="ours")
    theirs = grade_with(llm_server, name="theirs", template="own", temperature=0.5)
    same = grade_with(llm_server, name="same")
    reader = Client()
    reader.force_login(person("reader", Physician.Role.RESEARCHER))
    page = reader.get(reverse("compare_runs"), {"a": str(ours.code), "b": str(theirs.code)}).content.decode()
    assert "The runs used different graders" in page
    assert "The runs used different grader prompts" in page
    quiet = reader.get(reverse("compare_runs"), {"a": str(ours.code), "b": str(same.code)}).content.decode()
    assert "different grader" not in quiet
    document = reader.get(reverse("compare_runs_json"), {"a": str(ours.code), "b": str(theirs.code)}).json()
    assert len(document["grader_warnings"]) == 2
    imported = Run.objects.get(name="source")
    page = reader.get(reverse("compare_runs"), {"a": str(imported.code), "b": str(ours.code)}).content.decode()
    assert "source was imported: its grader and grader prompt are not known here" in page
