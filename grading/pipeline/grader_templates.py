"""Writes of stored grader templates (GraderTemplate): a template read from a file, or the
reference's, read from the user's own copy of simple-evals."""

from __future__ import annotations

from pathlib import Path

from django.db import transaction

from grading.models import GraderTemplate
from grading.pipeline.grader_prompt import TemplateError, check_template, template_hash
from grading.pipeline.simple_evals_template import SimpleEvalsCopyError, read_grader_template


class TemplateSaveError(ValueError):
    pass


def grader_template_save(*, name: str, text: str, source: str = "") -> tuple[GraderTemplate, bool]:
    """Store `text` under `name`; (template, created). Storing the same text again under its
    name changes nothing; another text under a taken name is refused."""
    name = name.strip()
    if not name:
        raise TemplateSaveError("the template needs a name")
    try:
        check_template(text)
    except TemplateError as exc:
        raise TemplateSaveError(str(exc)) from None
    digest = template_hash(text)
    with transaction.atomic():
        existing = GraderTemplate.objects.select_for_update().filter(name=name).first()
        if existing is not None:
            if existing.sha256 != digest:
                raise TemplateSaveError(
                    f"a different template is already stored as {name!r} (sha256 {existing.sha256[:12]}); "
                    "choose another name"
                )
            return existing, False
        return GraderTemplate.objects.create(name=name, text=text, sha256=digest, source=source[:500]), True


def grader_template_import_simple_evals(*, directory: str | Path, name: str) -> tuple[GraderTemplate, bool]:
    """The grader template of the simple-evals copy in `directory`, stored under `name`."""
    try:
        text, path = read_grader_template(directory)
    except SimpleEvalsCopyError as exc:
        raise TemplateSaveError(str(exc)) from None
    return grader_template_save(name=name, text=text, source=f"simple-evals: {path.resolve()}")
