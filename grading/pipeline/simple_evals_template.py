"""The reference's grader template, read from the user's own copy of simple-evals: a checkout,
or an installed copy (a directory holding ``healthbench_eval.py`` itself or in a package
folder). Plain Python, no Django. The file is parsed, never imported or run: the template is
the string assigned to ``GRADER_TEMPLATE``, taken as the module would compute it (a string
literal, possibly with ``.strip()``)."""

from __future__ import annotations

import ast
from pathlib import Path

EVAL_FILE = "healthbench_eval.py"
TEMPLATE_NAME = "GRADER_TEMPLATE"
_STRIPS = {"strip", "lstrip", "rstrip"}


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
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if (
        isinstance(node, ast.Call)
        and not node.args
        and not node.keywords
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in _STRIPS
    ):
        inner = _string_value(node.func.value)
        return None if inner is None else getattr(inner, node.func.attr)()
    return None


def read_grader_template(directory: str | Path) -> tuple[str, Path]:
    """(template text, the file it came from)."""
    path = find_eval_file(directory)
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except (OSError, UnicodeDecodeError, SyntaxError) as exc:
        raise SimpleEvalsCopyError(f"cannot read {path}: {exc}") from None
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(target, ast.Name) and target.id == TEMPLATE_NAME for target in node.targets
        ):
            text = _string_value(node.value)
            if text is None:
                raise SimpleEvalsCopyError(f"{path}: {TEMPLATE_NAME} is not a plain string")
            return text, path
    raise SimpleEvalsCopyError(f"{path} assigns no {TEMPLATE_NAME}")
