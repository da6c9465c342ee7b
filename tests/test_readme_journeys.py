"""The README's journeys, replayed as written: each code block of "Grade your model on
HealthBench" that runs `healthbench` is run by bash from a fresh state (a new VAR_DIR, so a new
SQLite database), with the test server standing where the README starts it, and every line the
README shows after it ("As it ran from a fresh clone") must appear in what the commands print,
in order. A shown line ending in " ..." is cut short there; the grading rate is not compared.
What the commands write to stderr holds no INFO line and no library's start-up line (AXES).

The test server's grader answers a third of the prompts with a sentence around its JSON and,
asked again, with the JSON alone (tests/llm_answers.py): the presets read answers as the
reference does and ask again, so no grade fails and the tokens shown count the second calls.

It takes minutes (3,276 grades, about 2 minutes of wall time on two busy cores), so it runs
when README_JOURNEYS=1 is set; HEALTHBENCH_SAMPLES names the public samples when they are not
beside the checkout.
"""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest_plugins = ["tests.llm_server"]

REPO = Path(__file__).resolve().parents[1]
README_URL = "http://127.0.0.1:8765/v1"
SAMPLES_AS_WRITTEN = "../shared/healthbench-samples"
RATE = re.compile(r"[\d.,]+ grades/s")


def journeys(readme: str) -> list[tuple[str, list[str]]]:
    """(commands, the lines shown after them) of each journey of the section."""
    start = readme.index("## Grade your model on HealthBench")
    section = readme[start : readme.index("\n## ", start + 3)]
    blocks = re.findall(r"^```\n(.*?)^```$", section, flags=re.S | re.M)
    pairs = []
    for index, block in enumerate(blocks):
        if re.search(r"^healthbench ", block, flags=re.M) and index + 1 < len(blocks):
            pairs.append((block, blocks[index + 1].splitlines()))
    return pairs


def shown_in_order(shown: list[str], printed: list[str]) -> list[str]:
    """The shown lines not found in `printed` in their order (empty when all are)."""
    missing, at = [], 0
    for line in shown:
        if line.strip() == "...":
            continue
        wanted = RATE.sub("", line.removesuffix(" ..."))
        found = next((i for i in range(at, len(printed)) if wanted in RATE.sub("", printed[i])), None)
        if found is None:
            missing.append(line)
        else:
            at = found + 1
    return missing


def samples_dir() -> Path:
    path = Path(os.environ.get("HEALTHBENCH_SAMPLES", REPO.parent / "shared" / "healthbench-samples"))
    if not (path / "eval_sample.jsonl").exists():
        pytest.skip(f"{path} is absent: the public samples are not on this machine (HEALTHBENCH_SAMPLES names them)")
    return path


def test_the_readme_finds_its_journeys():
    found = journeys((REPO / "README.md").read_text())
    assert len(found) == 2
    assert all(shown for _, shown in found)


@pytest.mark.skipif(
    not os.environ.get("README_JOURNEYS"), reason="replays the README's journeys (minutes): set README_JOURNEYS=1"
)
def test_the_journeys_print_what_the_readme_shows(llm_server, tmp_path):
    samples = samples_dir()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    command = bin_dir / "healthbench"
    # The console script as `pip install -e .` writes it, on this checkout.
    command.write_text(
        f"#!{sys.executable}\nimport sys\nsys.path.insert(0, {str(REPO)!r})\n"
        "from healthbench_web.cli import main\nmain()\n"
    )
    command.chmod(0o755)
    env = {
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        "HOME": str(tmp_path),
        "LANG": "C.UTF-8",
        "VAR_DIR": str(tmp_path / "var"),
    }
    missing: list[str] = []
    exports = ""  # a later journey runs in the same shell session as the README's
    for commands, shown in journeys((REPO / "README.md").read_text()):
        script = exports + commands.replace(README_URL, llm_server.url).replace(SAMPLES_AS_WRITTEN, str(samples))
        exports += "".join(line + "\n" for line in script.splitlines() if line.startswith("export "))
        done = subprocess.run(
            ["bash", "-e", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=1800
        )
        assert done.returncode == 0, done.stderr[-3000:]
        # A command logs warnings and errors only, and no library says it started.
        assert not re.search(r"\bINFO\b|AXES", done.stderr), done.stderr[-3000:]
        printed = done.stdout.replace(llm_server.url, README_URL).splitlines()
        for line in shown_in_order(shown, printed):
            # Beside each line not printed, the printed lines that begin as it does, to copy.
            like = [p for p in printed if p[:12] == line[:12]]
            missing.append(line + "".join(f"\n    printed: {p}" for p in like))
    # Every journey runs before the lines are compared, so one report names them all.
    assert missing == [], "\n".join(["shown in the README, not printed:", *missing])
