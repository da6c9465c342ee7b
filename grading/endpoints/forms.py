"""The endpoint form of the curator page and the admin: the operator's rules, checked on save."""

from __future__ import annotations

import re

from django import forms
from django.conf import settings
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from grading.endpoint_access import (
    AZURE,
    HEADER_NAME,
    AccessError,
    azure_problem,
    azure_url_parts,
    azure_version_problem,
    pairs_text,
    parse_pairs,
)
from grading.endpoint_rules import base_url_problem, has_batch_api, key_variable_problem
from grading.models import Endpoint

# Model names of known reasoning models (OpenAI's o-series and GPT-5 family, gpt-oss, DeepSeek's
# reasoner): saved without "Reasoning", they would be sent a temperature they reject.
REASONING_MODEL = re.compile(r"^(?:.*/)?(?:o\d(?:-|$)|o\d-mini|gpt-5|gpt-oss|deepseek-reasoner)", re.I)


class EndpointForm(forms.ModelForm):
    base_url = forms.URLField(
        required=False,
        assume_scheme="https",
        max_length=200,
        label=_("Base URL"),
        help_text=_(
            "Empty for OpenAI (https://api.openai.com/v1). Link-local and metadata addresses are refused; "
            "loopback and private networks only where the operator allows them."
        ),
    )

    extra_headers_text = forms.CharField(
        required=False,
        label=_("Extra headers"),
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text=_(
            "For a gateway, one per line: Name: value (e.g. HTTP-Referer: https://example.org). A secret "
            "is never typed here: write env:VARIABLE, a variable on ENDPOINT_KEY_VARIABLES."
        ),
    )
    extra_query_text = forms.CharField(
        required=False,
        label=_("Extra query parameters"),
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text=_("Added to every request's URL, one per line: name: value (a secret as env:VARIABLE)."),
    )

    class Meta:
        model = Endpoint
        fields = [
            "name",
            "provider",
            "base_url",
            "api_version",
            "api_style",
            "model",
            "key_variable",
            "reasoning",
            "reasoning_effort",
            "temperature",
            "max_output_tokens",
            "system_message",
            "structured_output",
            "lenient_answers",
            "timeout_seconds",
            "price_input",
            "price_cached_input",
            "price_output",
            "batch_discount",
            "requests_per_minute",
            "tokens_per_minute",
            "max_concurrency",
            "key_header",
            "notes",
        ]
        widgets = {
            "notes": forms.Textarea(attrs={"rows": 2, "dir": "auto"}),
            "system_message": forms.Textarea(attrs={"rows": 2, "dir": "auto"}),
        }
        labels = {"api_version": "Azure api-version", "key_header": "Key header"}
        help_texts = {
            "provider": "Azure OpenAI: its classic deployment URLs (with an api-version) or its v1 API (without).",
            "api_version": "Azure OpenAI's classic API only, e.g. 2024-10-21; the model is then the deployment's "
            "name. Empty: the v1 API (base URL https://YOUR-RESOURCE.openai.azure.com/openai/v1).",
            "key_header": "Empty: the provider's own (a bearer token; Azure's classic API: api-key). "
            "Authorization: a bearer token (an Entra ID token on Azure). Another name: a gateway's header, "
            "the key sent as it is.",
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
            label=_("API key variable"),
            help_text=_(
                "The environment variable the workers read the key from, from the operator's allowlist "
                "(ENDPOINT_KEY_VARIABLES). The key itself is never stored here."
            ),
        )
        self.fields["provider"].required = False
        if self.instance.pk and not self.is_bound:
            self.initial.setdefault("extra_headers_text", pairs_text(self.instance.extra_headers or {}))
            self.initial.setdefault("extra_query_text", pairs_text(self.instance.extra_query or {}))

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

    def clean_provider(self) -> str:
        return self.cleaned_data.get("provider") or "openai"  # a form that does not name one

    def clean_key_header(self) -> str:
        name = (self.cleaned_data.get("key_header") or "").strip()
        if name and not HEADER_NAME.match(name):
            raise forms.ValidationError(
                _("%(name)s is not a header name (letters, digits and hyphens)") % {"name": repr(name)}
            )
        return name

    def _clean_access(self, data: dict) -> None:
        """Azure OpenAI's URL and version, and a gateway's extra headers and parameters."""
        url = data.get("base_url") or ""
        parts = azure_url_parts(url)
        if parts and data.get("provider") != AZURE:
            self.add_error(
                "base_url",
                "This is an Azure OpenAI deployment URL: choose Azure OpenAI as the provider (its resource URL, "
                "deployment and api-version are then read from it).",
            )
        elif parts:
            resource, deployment, version = parts
            self.errors.pop("model", None)  # the deployment names it
            data |= {"base_url": resource, "model": deployment, "api_version": data.get("api_version") or version}
            for name in ("base_url", "model", "api_version"):
                setattr(self.instance, name, data[name])
            self.warnings.append(
                gettext(
                    "Read the deployment URL as Azure OpenAI's classic API: resource %(resource)s, deployment "
                    "%(deployment)s, api-version %(version)s."
                )
                % {"resource": resource, "deployment": deployment, "version": data["api_version"] or "(none)"}
            )
        elif "?" in url:
            self.add_error("base_url", "Give query parameters under Extra query parameters, not in the URL.")
        if data.get("provider") == AZURE and not self.has_error("base_url"):
            version = data.get("api_version") or ""
            if problem := azure_version_problem(version):
                self.add_error("api_version", problem)
            elif problem := azure_problem(data.get("base_url") or "", version):
                self.add_error("base_url", problem)
        elif data.get("api_version"):
            self.add_error("api_version", "Only Azure OpenAI's classic API takes an api-version.")
        for field, target, header in (
            ("extra_headers_text", "extra_headers", True),
            ("extra_query_text", "extra_query", False),
        ):
            try:
                pairs = parse_pairs(data.get(field) or "", what=str(self.fields[field].label or field), header=header)
            except AccessError as exc:
                self.add_error(field, str(exc))
                continue
            data[target] = pairs
            setattr(self.instance, target, pairs)

    def clean(self) -> dict:
        data = super().clean() or {}
        self.warnings: list[str] = []
        self._clean_access(data)
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
        if data.get("batch_discount") is not None and not has_batch_api(data.get("base_url") or ""):
            self.warnings.append(
                "A batch discount is set, but this base URL is not OpenAI's or Azure OpenAI's, the providers "
                "with a Batch API: batched runs will be offered and estimated at the discount and then fail. "
                "Clear the discount unless this server has a Batch API."
            )
        return data
