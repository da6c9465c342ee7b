"""The command line: `manage.py` and the `healthbench` console script (pyproject.toml).

`healthbench` runs any management command, and gives the researcher's and curator's own
short names:

    healthbench import FILE [--subset NAME]     import_healthbench
    healthbench grade ...                       grade
    healthbench report NAME [--format ...]      run_report
    healthbench agreement NAME [--format ...]   meta_eval
    ...                                         (SHORT_NAMES below; every other name as manage.py has it)

Before a command that reads or writes the database, both check that the database is
migrated, and stop with "run migrate first" instead of a traceback from the first query.
"""

from __future__ import annotations

import os
import sys

# The researcher's and curator's short names: (name, the manage.py command, its arguments, what
# it does). `healthbench --help` lists every one (tests/test_command_line.py).
SHORT_NAMES = (
    ("import", "import_healthbench", "FILE [--subset NAME]", "a HealthBench eval file"),
    ("export", "export_healthbench", "--subset NAME [--out F]", "a subset as a HealthBench eval file"),
    ("import-meta-eval", "import_meta_eval", "FILE", "the meta-eval file: responses and physician labels"),
    ("import-run", "import_run", "FILE --name NAME", "a simple-evals results file as a run"),
    ("export-run", "export_run", "NAME [--out F]", "a run as a simple-evals results file"),
    ("import-grader-labels", "import_grader_labels", "FILE --name NAME", "a grader's labels as a run"),
    ("report", "run_report", "NAME", "a run's score report"),
    ("agreement", "meta_eval", "NAME", "a run's agreement with physicians"),
    ("meta-eval", "meta_eval", "NAME", "the same, by the reference's name"),
    ("calibrate", "calibrate", "sample|status|report ...", "a run's physician-calibrated score"),
    ("freeze", "freeze_subset", "SUBSET", "freeze a subset's members and rubrics as a version"),
    ("build-subset", "build_subset", "consensus|hard ...", "rebuild a curated subset"),
    ("template", "grader_template", "import|list", "grader prompts (the reference's, from your copy)"),
    ("demo", "load_demo", "[--password P]", "the demo accounts and data"),
)
ALIASES = {name: command for name, command, _, _ in SHORT_NAMES}

# Commands that work on an unmigrated (or absent) database, or make it.
NO_DATABASE = {
    "migrate",
    "makemigrations",
    "showmigrations",
    "sqlmigrate",
    "squashmigrations",
    "optimizemigration",
    "help",
    "version",
    "check",
    "collectstatic",
    "findstatic",
    "test",
    "startapp",
    "startproject",
    "shell",
    "dbshell",
    "diffsettings",
    "compilemessages",
    "makemessages",
    "sendtestemail",
    "inspectdb",
    "createcachetable",
    "sqlflush",
    "sqlsequencereset",
}


def _line(name: str, arguments: str, what: str) -> str:
    return f"  {f'{name} {arguments}'.rstrip():<38} {what}\n"


USAGE = (
    "usage: healthbench COMMAND [options]        (healthbench COMMAND --help for a command's options)\n"
    "\nThe researcher's and curator's commands:\n"
    + _line("migrate", "", "create or update the database (run it first)")
    + _line("endpoint", "add|list|check", "the graders and policy models runs call")
    + _line("grade", "...", "launch, follow, resume or cancel a grading run")
    + "\nShort names (in parentheses, the manage.py command each one runs):\n"
    + "".join(_line(name, arguments, f"{what} ({command})") for name, command, arguments, what in SHORT_NAMES)
    + "\nEvery manage.py command works too (healthbench help lists them). Commands log warnings\n"
    "and errors only; -v 2 (or LOG_LEVEL=INFO) shows their progress as well.\n"
)

# Commands that serve: their INFO lines (requests, a worker's progress) are what they are for.
SERVERS = {"runserver"}


def _verbosity(args: list[str]) -> int:
    """The -v / --verbosity a command was given (Django's default, 1, when none)."""
    for index, arg in enumerate(args):
        for flag in ("-v", "--verbosity"):
            if arg == flag and index + 1 < len(args) and args[index + 1].isdigit():
                return int(args[index + 1])
            value = arg.removeprefix(flag).removeprefix("=")
            if arg.startswith(flag) and arg != flag and value.isdigit():
                return int(value)
    return 1


def unapplied_migrations() -> int | None:
    """How many migrations the database lacks; None when it cannot be asked (it is
    unreachable: the command then says so itself)."""
    from django.db import DEFAULT_DB_ALIAS, connections
    from django.db.migrations.executor import MigrationExecutor
    from django.db.utils import Error

    try:
        executor = MigrationExecutor(connections[DEFAULT_DB_ALIAS])
        return len(executor.migration_plan(executor.loader.graph.leaf_nodes()))
    except Error:
        return None


def migrate_first_message(missing: int, program: str) -> str:
    from django.conf import settings

    name = settings.DATABASES["default"]["NAME"]
    return (
        f"The database ({name}) is not migrated: {missing} migration{'s' if missing != 1 else ''} to apply. "
        f"Run migrate first: {program} migrate"
    )


def run(argv: list[str], *, program: str) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "healthbench_web.settings")
    import django
    from django.core.management import execute_from_command_line

    args = list(argv[1:])
    if program == "healthbench" and (not args or args[0] in ("-h", "--help")):
        sys.stdout.write(USAGE)
        return
    if args and args[0] in ALIASES:
        args[0] = ALIASES[args[0]]
    command = args[0] if args else "help"
    if "LOG_LEVEL" not in os.environ and command not in SERVERS:
        # Read by the settings: a command says what it did, not every step it took.
        os.environ["LOG_LEVEL"] = "INFO" if _verbosity(args[1:]) >= 2 else "WARNING"
    asks_help = any(a in ("-h", "--help") for a in args[1:])
    if command not in NO_DATABASE and not command.startswith("-") and not asks_help:
        django.setup()
        missing = unapplied_migrations()
        if missing:
            sys.stderr.write(migrate_first_message(missing, program) + "\n")
            raise SystemExit(1)
    execute_from_command_line([argv[0], *args])


def main() -> None:
    """The `healthbench` console script."""
    run(sys.argv, program="healthbench")
