"""The admin's text fields in any script: each takes its direction from its own words (dir="auto")."""

from django.contrib.admin.widgets import AdminTextareaWidget, AdminTextInputWidget
from django.db import models

# `formfield_overrides` for every ModelAdmin that edits stored text (messages, responses, criteria, notes).
TEXT_IN_ANY_SCRIPT: dict = {
    models.TextField: {"widget": AdminTextareaWidget(attrs={"dir": "auto"})},
    models.CharField: {"widget": AdminTextInputWidget(attrs={"dir": "auto"})},
}
