"""The reference's grader template, read from the user's own copy of simple-evals: a checkout,
or an installed copy (a directory holding ``healthbench_eval.py`` itself or in a package
folder). Plain Python, no Django. The file is parsed, never imported or run: the template is
the string assigned to ``GRADER_TEMPLATE``, taken as the module would compute it (a string
literal, possibly with ``.strip()``). The file is refused by its size before it is read, and a
file nested deeper than Python's parser goes (or than any real module) is refused with a
sentence, not a traceback."""

from __future__ import annotations

import ast
from pathlib import Path

from grading.pipeline.grader_prompt import FileTooLarge, read_text_at_most

EVAL_FILE = "healthbench_eval.py"
TEMPLATE_NAME = "GRADER_TEMPLATE"
_STRIPS = {"strip", "lstrip", "rstrip"}
# The reference's module is 26 KB; a copy 40 times that size is no copy of it.
MAX_EVAL_FILE_BYTES = 1_000_000
# The most ``.strip()`` calls read around the template's literal (the reference has one).
MAX_STRIPS = 8


class SimpleEvalsCopyError(ValueError):
    """No readable grader template in the directory given."""


def find_eval_file(directory: str | Path) -> Path:
    """healthbench_eval.py in `directory`, or in one of its package folders (an installed
    copy, e.g. site-packages/simple_evals/)."""
    root = Path(directory)
    if not root.is_dir():
        raise SimpleEvalsCopyError(f"{root} is not a directory")
    direct = root / EVAL_FILE
    if direct.is_file():
        return direct
    found = sorted(root.glob(f"*/{EVAL_FILE}"))
    if len(found) == 1:
        return found[0]
    if found:
        listed = ", ".join(str(p) for p in found)
        raise SimpleEvalsCopyError(f"{root} holds several copies of {EVAL_FILE} ({listed}): name one folder")
    raise SimpleEvalsCopyError(f"{root} holds no {EVAL_FILE}: give a simple-evals checkout or installed copy")


def _string_value(node: ast.expr) -> str | None:
    calls: list[str] = []
    while (
        isinstance(node, ast.Call)
        and not node.args
        and not node.keywords
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in _STRIPS
        and len(calls) < MAX_STRIPS
    ):
        calls.append(node.func.attr)
        node = node.func.value
    if not (isinstance(node, ast.Constant) and isinstance(node.value, str)):
        return None
    text = node.value
    for call in reversed(calls):
        text = getattr(text, call)()
    return text


def read_grader_template(directory: str | Path) -> tuple[str, Path]:
    """(template text, the file it came from)."""
    path = find_eval_file(directory)
    try:
        source = read_text_at_most(path, MAX_EVAL_FILE_BYTES, what=f"simple-evals' {EVAL_FILE}")
    except OSError as exc:
        raise SimpleEvalsCopyError(f"cannot read {path}: {exc.strerror}") from None
    except (FileTooLarge, UnicodeDecodeError) as exc:
        raise SimpleEvalsCopyError(f"cannot read {path}: {exc}") from None
    try:
        tree = ast.parse(source, filename=str(path))
    except (SyntaxError, ValueError) as exc:
        raise SimpleEvalsCopyError(f"cannot read {path}: {exc}") from None
    except (MemoryError, RecursionError):
        # CPython's parser stops at a fixed depth (a MemoryError from its own stack, or a
        # RecursionError building the tree), long before memory runs out at this file size.
        raise SimpleEvalsCopyError(
            f"cannot read {path}: it nests deeper than Python's parser allows, so it is no copy of simple-evals"
        ) from None
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(target, ast.Name) and target.id == TEMPLATE_NAME for target in node.targets
        ):
            text = _string_value(node.value)
            if text is None:
                raise SimpleEvalsCopyError(f"{path}: {TEMPLATE_NAME} is not a plain string")
            return text, path
    raise SimpleEvalsCopyError(f"{path} assigns no {TEMPLATE_NAME}")
