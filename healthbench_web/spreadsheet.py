"""CSV that a spreadsheet opens without running anything.

Spreadsheets treat a cell that starts with =, +, -, @ (or a tab or carriage return, which
some strip before looking) as a formula, and tag names in our reports come from imported
files. Every CSV the product writes goes through `csv_text`, which prefixes such a cell with
a single quote, the usual mark for "this is text", unless the cell is a number.
"""

import csv
import io
import re
from collections.abc import Iterable
from typing import Any

FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")


def safe_cell(value: Any) -> Any:
    """The value to write in a CSV cell: numbers and plain text unchanged, a would-be formula quoted."""
    if isinstance(value, str) and value.startswith(FORMULA_START) and not _NUMBER.fullmatch(value):
        return "'" + value
    return value


def csv_text(header: Iterable[Any], rows: Iterable[Iterable[Any]]) -> str:
    """A whole CSV document (\\n line ends) with every cell passed through safe_cell."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow([safe_cell(c) for c in header])
    writer.writerows([safe_cell(c) for c in row] for row in rows)
    return out.getvalue()
