"""Markdown rendered once: each stored text's safe HTML, kept under a hash of the text.

Defined here and re-exported by annotation/models/__init__.py, so it belongs to the annotation
app like its other models. The store is written by readers (annotation/services/rendered_markdown.py)
and never edited: a text that changes, or a renderer that changes, hashes to a new key.
"""

from django.db import models


class RenderedMarkdown(models.Model):
    """One text's HTML as healthbench_web.markdown_text renders it (sanitised, dir="auto" on each block)."""

    # A hash of the renderer's own source and library versions, then of the text: a changed
    # text or a changed allowlist is a new key, so no row is ever stale; none is updated in place.
    digest = models.CharField(max_length=64, primary_key=True)
    html = models.TextField()

    class Meta:
        verbose_name = "rendered Markdown"
        verbose_name_plural = "rendered Markdown"

    def __str__(self) -> str:
        return f"rendered Markdown {self.digest[:12]}"
