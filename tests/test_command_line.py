"""The `healthbench` command line (healthbench_web/cli.py): its help lists every short name,
and a command prints what it did, not INFO lines or a library's start-up line, unless asked."""

import os
import subprocess
import sys

import pytest
from django.core.management import get_commands

from healthbench_web.cli import ALIASES, SHORT_NAMES, USAGE, run
from tests.conftest import REPO


def test_the_help_lists_every_short_name_with_its_command(capsys):
    run(["healthbench", "--help"], program="healthbench")
    shown = capsys.readouterr().out
    assert shown == USAGE
    lines = shown.splitlines()
    for name, command, _, _ in SHORT_NAMES:
        assert any(line.startswith(f"  {name} ") and line.endswith(f"({command})") for line in lines), name


def test_every_short_name_runs_a_command_that_exists():
    commands = get_commands()
    assert sorted(set(ALIASES.values()) - set(commands)) == []
    # One entry per name: a repeated name would shadow the first.
    assert len(ALIASES) == len(SHORT_NAMES)


LOGS = "import logging; logging.getLogger('healthbench.check').info('an info line'); print('done')"


def _shell(*options: str, tmp_path) -> subprocess.CompletedProcess:
    env = {key: value for key, value in os.environ.items() if key != "LOG_LEVEL"} | {"VAR_DIR": str(tmp_path)}
    command = [sys.executable, "manage.py", "shell", *options, "-c", LOGS]
    return subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=120, check=True)


def test_a_command_logs_no_info_line_and_no_axes_line_unless_asked(tmp_path):
    done = _shell(tmp_path=tmp_path)
    assert done.stdout.endswith("done\n")
    assert "an info line" not in done.stderr
    assert "AXES" not in done.stderr


@pytest.mark.parametrize("option", [("-v", "2"), ("-v2",), ("--verbosity=2",), ("--verbosity", "3")])
def test_verbosity_two_shows_the_info_lines(tmp_path, option):
    done = _shell(*option, tmp_path=tmp_path)
    assert "an info line" in done.stderr
    assert "AXES: BEGIN" not in done.stderr
