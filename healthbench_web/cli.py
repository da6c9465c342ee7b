"""The command line: `manage.py` and the `healthbench` console script (pyproject.toml).

`healthbench` runs any management command, and gives the researcher's and curator's own
short names:

    healthbench import FILE [--subset NAME]     import_healthbench
    healthbench grade ...                       grade
    healthbench report NAME [--format ...]      run_report
    healthbench agreement NAME [--format ...]   meta_eval
    ...                                         (ALIASES below; every other name as manage.py has it)

Before a command that reads or writes the database, both check that the database is
migrated, and stop with "run migrate first" instead of a traceback from the first query.
"""

from __future__ import annotations

import os
import sys

ALIASES = {
    "import": "import_healthbench",
    "export": "export_healthbench",
    "import-meta-eval": "import_meta_eval",
    "import-run": "import_run",
    "export-run": "export_run",
    "import-grader-labels": "import_grader_labels",
    "report": "run_report",
    "agreement": "meta_eval",
    "meta-eval": "meta_eval",
    "freeze": "freeze_subset",
    "build-subset": "build_subset",
    "template": "grader_template",
    "demo": "load_demo",
    "calibrate": "calibrate",
}

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

USAGE = """\
usage: healthbench COMMAND [options]        (healthbench COMMAND --help for a command's options)

The researcher's and curator's commands:
  migrate                      create or update the database (run it first)
  import FILE [--subset NAME]  a HealthBench eval file (import_healthbench)
  import-meta-eval FILE        the meta-eval file: responses and physician labels
  endpoint add|list|check      the graders and policy models runs call
  grader_template import|list  grader prompts (the reference's, from your simple-evals copy)
  grade ...                    launch, follow, resume or cancel a grading run
  report NAME                  a run's score report (run_report)
  agreement NAME               a run's agreement with physicians (meta_eval)
  export-run NAME              a run as a simple-evals results file
Every manage.py command works too (healthbench help lists them).
"""


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
