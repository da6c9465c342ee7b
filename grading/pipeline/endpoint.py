"""An endpoint as one call sees it: a plain, frozen value that the event loop can hold and
that the rate limiter keys on. Built by the batch service from the run's snapshot of the
endpoint (grading.models.GraderConfig); named CallTarget so that it is not taken for the
curated grading.models.Endpoint."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from grading.endpoint_access import AZURE, AccessError, azure_problem, resolved
from grading.endpoint_rules import base_url_problem, key_variable_problem

if TYPE_CHECKING:
    from grading.models import GraderConfig

CHAT = "chat"
RESPONSES = "responses"


class EndpointConfigError(Exception):
    """A configuration that cannot work at all, e.g. its API key variable is not set."""


@dataclass(frozen=True)
class CallTarget:
    """What a call needs from a run's endpoint snapshot."""

    base_url: str
    model: str
    api_key_env: str
    temperature: float | None
    max_tokens: int | None
    timeout: float
    requests_per_minute: int | None = None
    tokens_per_minute: int | None = None
    api_style: str = CHAT
    reasoning: bool = False
    reasoning_effort: str = ""
    structured_output: bool = False
    # Read the grader's answer leniently (grading.pipeline.grader_prompt.parse_answer).
    lenient_answers: bool = True
    name: str = ""
    system_message: str = ""
    provider: str = "openai"
    api_version: str = ""  # Azure OpenAI's classic API
    key_header: str = ""
    extra_headers: tuple[tuple[str, str], ...] = ()
    extra_query: tuple[tuple[str, str], ...] = ()

    @property
    def azure_classic(self) -> bool:
        return self.provider == AZURE and bool(self.api_version)

    @classmethod
    def of(cls, config: GraderConfig) -> CallTarget:
        return cls(
            base_url=config.base_url,
            model=config.model,
            api_key_env=config.api_key_env,
            temperature=None if config.reasoning else config.temperature,
            max_tokens=config.max_tokens,
            timeout=config.timeout_seconds,
            requests_per_minute=config.requests_per_minute,
            tokens_per_minute=config.tokens_per_minute,
            api_style=config.api_style,
            reasoning=config.reasoning,
            reasoning_effort=config.reasoning_effort,
            structured_output=config.structured_output,
            lenient_answers=config.lenient_answers,
            name=config.endpoint_name or config.model,
            system_message=config.system_message,
            provider=config.provider,
            api_version=config.api_version,
            key_header=config.key_header,
            extra_headers=tuple(sorted((config.extra_headers or {}).items())),
            extra_query=tuple(sorted((config.extra_query or {}).items())),
        )

    def check(self) -> None:
        """The operator's policy, checked again where the call is made: the key variable
        must be on the allowlist and the URL allowed, whatever the database says."""
        problem = key_variable_problem(self.api_key_env) or base_url_problem(self.base_url)
        if not problem and self.provider == AZURE:
            problem = azure_problem(self.base_url, self.api_version)
        if problem:
            raise EndpointConfigError(f"endpoint {self.name}: {problem}")
        self.headers()
        self.query()

    def headers(self) -> dict[str, str]:
        """The extra headers to send, with the key in its own header when one is named; secrets
        read now from their allowlisted variables. Raises EndpointConfigError."""
        try:
            headers = resolved(dict(self.extra_headers), where=f"endpoint {self.name}, extra headers")
        except AccessError as exc:
            raise EndpointConfigError(str(exc)) from None
        if self.key_header and self.key_header.lower() != "authorization" and self.api_key_env:
            headers[self.key_header] = self.api_key()
        return headers

    def query(self) -> dict[str, str]:
        try:
            return resolved(dict(self.extra_query), where=f"endpoint {self.name}, extra query parameters")
        except AccessError as exc:
            raise EndpointConfigError(str(exc)) from None

    def api_key(self) -> str:
        """The key from the named environment variable. No name: a local server that wants none."""
        if not self.api_key_env:
            return "unused"
        problem = key_variable_problem(self.api_key_env)
        if problem:
            raise EndpointConfigError(f"endpoint {self.name}: {problem}")
        key = os.environ.get(self.api_key_env, "")
        if not key:
            raise EndpointConfigError(
                f"endpoint {self.name}: the environment variable {self.api_key_env} (the API key) is not set"
            )
        return key

    @property
    def limit_key(self) -> str:
        """Providers limit per model and key; we know the model and where it is served."""
        return f"{self.base_url or 'openai'}|{self.model}|{self.api_key_env}"
