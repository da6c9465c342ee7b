"""Rewriting stored text that breaks the rules the importers enforce (see selectors.stored_text)."""

from django.db import transaction

from annotation.selectors.stored_text import StoredTextProblem


def stored_text_repair(*, problems: list[StoredTextProblem]) -> int:
    """Store each problem's repaired value (U+FFFD for bad characters, cut to the column for
    over-long text); return how many values were rewritten. Problems without a safe repair
    (a unique value too long) are left for a person."""
    repaired = 0
    with transaction.atomic():
        for problem in problems:
            if problem.repaired is None:
                continue
            # update(), not save(): only this column changes, and no save() logic runs.
            problem.model._default_manager.filter(pk=problem.pk).update(**{problem.field: problem.repaired})
            repaired += 1
    return repaired
