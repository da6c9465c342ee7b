"""The endpoint form of the curator page and the admin: the operator's rules, checked on save."""

from __future__ import annotations

import re

from django import forms
from django.conf import settings

from grading.endpoint_rules import base_url_problem, key_variable_problem
from grading.models import Endpoint

# Model names of known reasoning models (OpenAI's o-series and GPT-5 family, gpt-oss, DeepSeek's
# reasoner): saved without "Reasoning", they would be sent a temperature they reject.
REASONING_MODEL = re.compile(r"^(?:.*/)?(?:o\d(?:-|$)|o\d-mini|gpt-5|gpt-oss|deepseek-reasoner)", re.I)


class EndpointForm(forms.ModelForm):
    base_url = forms.URLField(
        required=False,
        assume_scheme="https",
        max_length=200,
        label="Base URL",
        help_text="Empty for OpenAI (https://api.openai.com/v1). Link-local and metadata addresses are refused; "
        "loopback and private networks only where the operator allows them.",
    )

    class Meta:
        model = Endpoint
        fields = [
            "name",
            "base_url",
            "api_style",
            "model",
            "key_variable",
            "reasoning",
            "reasoning_effort",
            "temperature",
            "max_output_tokens",
            "system_message",
            "structured_output",
            "timeout_seconds",
            "price_input",
            "price_cached_input",
            "price_output",
            "batch_discount",
            "requests_per_minute",
            "tokens_per_minute",
            "max_concurrency",
            "notes",
        ]
        widgets = {"notes": forms.Textarea(attrs={"rows": 2}), "system_message": forms.Textarea(attrs={"rows": 2})}
        help_texts = {
            "system_message": "Sent before every conversation (as a developer message on Responses); empty: none. "
            "The Original HealthBench grader preset sends the reference's.",
        }

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        allowed = list(settings.ENDPOINT_KEY_VARIABLES)
        current = self.initial.get("key_variable") or (self.instance.key_variable if self.instance.pk else "")
        choices = [("", "(none: a server that needs no key)")] + [(name, name) for name in allowed]
        if current and current not in allowed:
            # An endpoint from before the allowlist: shown, so the curator sees what to replace.
            choices.append((current, f"{current} (not on ENDPOINT_KEY_VARIABLES: choose another)"))
        self.fields["key_variable"] = forms.ChoiceField(
            choices=choices,
            required=False,
            label="API key variable",
            help_text="The environment variable the workers read the key from, from the operator's allowlist "
            "(ENDPOINT_KEY_VARIABLES). The key itself is never stored here.",
        )

    def clean_key_variable(self) -> str:
        name = self.cleaned_data.get("key_variable") or ""
        problem = key_variable_problem(name)
        if problem:
            raise forms.ValidationError(problem)
        return name

    def clean_base_url(self) -> str:
        url = (self.cleaned_data.get("base_url") or "").rstrip("/")
        # The workers check again, resolving, before every batch.
        problem = base_url_problem(url, resolve=True, unresolved_ok=True)
        if problem:
            raise forms.ValidationError(problem)
        return url

    def clean(self) -> dict:
        data = super().clean() or {}
        self.warnings: list[str] = []
        if data.get("reasoning"):
            temperature = data.get("temperature")
            if temperature == 0 or temperature is None:
                # The field's default, as the blank form shows it, or no field at all: nothing was
                # chosen, so nothing is sent. Set on the instance too: a field left out of the POST
                # is not copied onto it, which would keep the model's default of 0.
                data["temperature"] = None
                self.instance.temperature = None
            else:
                # Reasoning models reject a temperature with a 400: say so rather than drop it unseen.
                self.add_error(
                    "temperature",
                    "Reasoning models take no temperature (they refuse requests that set one). Leave it empty, "
                    "or untick Reasoning if this model is not a reasoning model.",
                )
        else:
            if data.get("reasoning_effort"):
                self.add_error("reasoning_effort", "Only reasoning models take a reasoning effort.")
            model = data.get("model") or ""
            if REASONING_MODEL.match(model):
                self.warnings.append(
                    f"{model} looks like a reasoning model, but Reasoning is not ticked: runs will send it a "
                    "temperature and max_tokens, which reasoning models refuse. Tick Reasoning if it is one."
                )
        return data
