"""The layout's rules, checked on the source: no import circles between our modules (every
import counts, also inside functions and under TYPE_CHECKING), and the pure modules stay free
of Django so that they can be used and tested as plain functions over arrays."""

import ast
import io
import re
import sys
import tokenize
from pathlib import Path

import pytest

from tests.conftest import REPO

PACKAGES = ("annotation", "grading", "healthbench_web")
# A module says it is pure computation (plain values in, plain values out; no Django, no
# database) in its docstring, in words like these; every module that says so is checked.
SAYS_PURE = re.compile(r"\b(pure|plain) (python|numpy|arithmetic|functions)\b|\bno django\b", re.IGNORECASE)
# The pure modules the layout relies on: they must keep saying so (and so stay checked).
KNOWN_PURE = {
    "grading.reports.scoring",
    "grading.reports.bootstrap",
    "grading.reports.comparison",
    "grading.calibration.ppi",
    "grading.metaeval.agreement",
    "grading.metaeval.chance",
    "grading.metaeval.grader_comparison",
    "grading.pipeline.grader_prompt",
    "grading.pipeline.request_shape",
    "grading.pipeline.response_prompt",
    "grading.pipeline.replies",
    "grading.pipeline.provider_errors",
    "grading.pipeline.cost",
    "grading.reference_grader",
    "annotation.rubric_checks",
    "annotation.formats.rubric_merge",
    "annotation.formats.healthbench",
    "annotation.formats.validation",
}


def _modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (REPO / package).rglob("*.py"):
            if "migrations" in path.parts:
                continue
            parts = list(path.relative_to(REPO).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


MODULES = _modules()


def _says_pure(path: Path) -> bool:
    return path.name != "__init__.py" and bool(SAYS_PURE.search(ast.get_docstring(ast.parse(path.read_text())) or ""))


PURE = sorted(name for name, path in MODULES.items() if _says_pure(path))


def _imports(name: str, path: Path) -> set[str]:
    """Every module of ours that `name` imports, wherever the import statement stands."""
    targets: set[str] = set()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                # `from package import module` names the module; `from module import name` the module.
                targets.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base)
    return {target for target in targets if target in MODULES and target != name}


GRAPH = {name: _imports(name, path) for name, path in MODULES.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_checker_finds_a_circle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_module_of_ours_imports_itself_through_others():
    assert _cycles(GRAPH) == []


def test_the_modules_known_to_be_pure_say_so():
    assert KNOWN_PURE <= set(PURE), KNOWN_PURE - set(PURE)


@pytest.mark.parametrize("name", PURE)
def test_pure_modules_import_no_django_and_no_models(name):
    path = MODULES[name]
    imported: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            imported.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module.split(".")[0])
    assert not imported & {"django", "rest_framework", "celery"}, f"{name} imports {imported}"
    assert not {target for target in GRAPH[name] if target.endswith(".models") or ".models." in target}


def test_selectors_import_no_services():
    # Reads shaped for pages sit below the writes: a selector that imports a service inverts the layers.
    for name in MODULES:
        if ".selectors" in name:
            assert not {t for t in GRAPH[name] if ".services" in t or t.endswith("pipeline.runs")}, name


def test_reports_read_only_the_progress_of_the_pipeline():
    # As grading/reports/__init__.py says: scores never depend on what launches or grades.
    for name in MODULES:
        if name.startswith("grading.reports"):
            pipeline = {t for t in GRAPH[name] if t.startswith("grading.pipeline")}
            assert pipeline <= {"grading.pipeline", "grading.pipeline.progress"}, (name, pipeline)


def test_annotation_reaches_grading_only_through_its_seam():
    # Grading builds on annotation; annotation/grading_seam.py names the two things it needs back.
    for name in MODULES:
        if name.startswith("annotation") and name != "annotation.grading_seam":
            assert not {t for t in GRAPH[name] if t.startswith("grading")}, name


def test_no_module_defines_its_own_chunking():
    # healthbench_web.bulk.chunks is the one helper for __in lookups in slices.
    for name, path in MODULES.items():
        text = path.read_text()
        assert not re.search(r"^CHUNK = |^def _chunks\(", text, flags=re.M), name


def test_models_import_no_services_views_or_tasks():
    for name in MODULES:
        if name.endswith(".models") or ".models." in name:
            assert not {
                t for t in GRAPH[name] if any(p in t for p in (".services", ".views", ".pipeline", ".reports"))
            }, name


def test_no_top_level_module_is_one_of_six_siblings_sharing_a_prefix():
    for package in ("annotation", "grading"):
        names = [p.stem for p in (REPO / package).glob("*.py") if p.stem != "__init__"]
        prefixes: dict[str, int] = {}
        for stem in names:
            if "_" in stem:
                prefixes[stem.split("_")[0]] = prefixes.get(stem.split("_")[0], 0) + 1
        assert max(prefixes.values(), default=0) < 6, (package, prefixes)


# --- names of files and modules in the prose ------------------------------------------------
# A path or a dotted module name in the README, ARCHITECTURE.md or a comment or docstring of
# the product must name something that exists: a moved module otherwise leaves readers looking
# for it. (CHANGELOG.md is history: it may name what is gone.)

TOP_FOLDERS = (*PACKAGES, "tests", "bench", "scripts", ".ci")
# The templates and static files were top-level folders before they moved into healthbench_web
# (package data); a path that still starts with one of them is looked for, so it is found stale.
FORMER_TOP_FOLDERS = ("templates", "static")
_FOLDERS = "|".join(re.escape(folder) for folder in (*TOP_FOLDERS, *FORMER_TOP_FOLDERS))
PATH_REF = re.compile(rf"(?<![\w./-])((?:{_FOLDERS})/[\w./-]*\w)")
DOTTED_REF = re.compile(rf"(?<![\w./-])((?:{'|'.join(PACKAGES)})(?:\.[A-Za-z_]\w*)+)")
FILE_SUFFIXES = (".py", ".html", ".md", ".txt", ".json", ".jsonl", ".csv", ".css", ".js", ".toml", ".yml")


def _path_exists(ref: str) -> bool:
    # A template named as Django names it ("annotation/label.html") lives under healthbench_web/templates/.
    templates = REPO / "healthbench_web" / "templates"
    return (REPO / ref).exists() or (ref.endswith(".html") and (templates / ref).exists())


def _defines(path: Path, name: str) -> bool:
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and node.name == name:
            return True
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store) and node.id == name:
            return True
        if isinstance(node, ast.Import | ast.ImportFrom) and any(
            (alias.asname or alias.name.split(".")[0]) == name for alias in node.names
        ):
            return True
    return False


def _dotted_exists(ref: str) -> bool:
    """A module, or a name its module defines (`grading.pipeline.runs.run_cancel`); a model named
    as Django does in a string reference (`grading.Response`) counts as its app's."""
    parts = ref.split(".")
    if len(parts) == 2 and parts[1][:1].isupper():
        return True
    for end in range(len(parts), 0, -1):
        module = ".".join(parts[:end])
        if module in MODULES or module in PACKAGES:
            path = MODULES.get(module, REPO / module / "__init__.py")
            return end == len(parts) or _defines(path, parts[end])
    return False


def _prose(path: Path) -> str:
    """A document's text, or a module's comments and docstrings (not its string values: Celery
    task names such as "grading.tasks.grade_batch" are names, not modules)."""
    if path.suffix == ".md":
        return path.read_text()
    source = path.read_text()
    pieces = [
        token.string
        for token in tokenize.generate_tokens(io.StringIO(source).readline)
        if token.type == tokenize.COMMENT
    ]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            pieces.append(ast.get_docstring(node) or "")
    return "\n".join(pieces)


def _stale_references(paths: list[Path]) -> list[str]:
    stale = []
    for path in paths:
        text = _prose(path)
        for ref in PATH_REF.findall(text):
            if not _path_exists(ref):
                stale.append(f"{path.relative_to(REPO)}: {ref}")
        for ref in DOTTED_REF.findall(text):
            if not ref.endswith(FILE_SUFFIXES) and not _dotted_exists(ref):
                stale.append(f"{path.relative_to(REPO)}: {ref}")
    return stale


def test_the_readme_and_architecture_name_only_paths_and_modules_that_exist():
    assert _stale_references([REPO / "README.md", REPO / "ARCHITECTURE.md"]) == []


def test_comments_and_docstrings_name_only_paths_and_modules_that_exist():
    assert _stale_references(list(MODULES.values())) == []


def test_the_stale_name_check_finds_a_moved_module(tmp_path, monkeypatch):
    monkeypatch.setattr(sys.modules[__name__], "REPO", tmp_path)
    (tmp_path / "grading").mkdir()
    (tmp_path / "grading" / "__init__.py").write_text("")
    doc = tmp_path / "ARCHITECTURE.md"
    doc.write_text("Runs start in `grading/models.py` and `grading.pipeline.runs.run_launch`.\n")
    assert _stale_references([doc]) == [
        "ARCHITECTURE.md: grading/models.py",
        "ARCHITECTURE.md: grading.pipeline.runs.run_launch",
    ]


def test_the_stale_name_check_finds_a_path_into_the_former_top_level_folders(tmp_path, monkeypatch):
    monkeypatch.setattr(sys.modules[__name__], "REPO", tmp_path)
    for file in ("healthbench_web/static/style.css", "healthbench_web/templates/errors/404.html"):
        (tmp_path / file).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / file).write_text("")
    doc = tmp_path / "README.md"
    doc.write_text(
        "See `healthbench_web/static/style.css`, `errors/404.html`, `static/style.css` and "
        "`templates/errors/404.html`.\n"
    )
    assert _stale_references([doc]) == ["README.md: static/style.css", "README.md: templates/errors/404.html"]


def test_no_templates_or_static_folder_is_left_at_the_top():
    assert [name for name in FORMER_TOP_FOLDERS if (REPO / name).exists()] == []


def test_the_graders_ask_and_retry_loop_is_written_once():
    """Per criterion and per response, the grader is asked through one loop (cut-off, refusal,
    unreadable answers): no other function of the client calls the endpoint itself."""
    tree = ast.parse(MODULES["grading.pipeline.client"].read_text())
    callers = {
        function.name
        for function in ast.walk(tree)
        if isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef)
        for node in ast.walk(function)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "chat"
    }
    assert callers == {"_ask_until_read"}


def test_every_benchmark_that_makes_a_database_takes_its_name():
    """Benchmarks make scratch PostgreSQL databases (bench/_db.py); each takes --database, so
    two of them, or two checkouts, never drop each other's."""
    for path in sorted((REPO / "bench").glob("*_bench.py")):
        source = path.read_text()
        if "fresh_postgres" in source or "DATABASE_URL" in source:
            assert '"--database"' in source, path.name
            assert not re.search(r'fresh_postgres\("', source), f"{path.name} names its database itself"


# Functions still longer than a screen, to be split (issue 33); no other may join them.
LONG_FUNCTIONS = {
    "grading.pipeline.progress.run_progress",
    "grading.pipeline.batches._work",
    "grading.reports.run_import._store",
    "grading.reports.scoring.score_grades",
}


def test_no_function_of_the_product_is_longer_than_80_lines():
    long = set()
    for name, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and (node.end_lineno or 0) - node.lineno >= 80:
                long.add(f"{name}.{node.name}")
    assert long - LONG_FUNCTIONS == set(), "split it: a function should fit on a screen"
    assert LONG_FUNCTIONS - long == set(), "it was split: take it off LONG_FUNCTIONS"
