"""An endpoint as one call sees it: a plain, frozen value that the event loop can hold and
that the rate limiter keys on. Built by the batch service from the run's snapshot of the
endpoint (grading.models.GraderConfig); named CallTarget so that it is not taken for the
curated grading.models.Endpoint."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

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
    name: str = ""
    system_message: str = ""

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
            name=config.endpoint_name or config.model,
            system_message=config.system_message,
        )

    def check(self) -> None:
        """The operator's policy, checked again where the call is made: the key variable
        must be on the allowlist and the URL allowed, whatever the database says."""
        problem = key_variable_problem(self.api_key_env) or base_url_problem(self.base_url)
        if problem:
            raise EndpointConfigError(f"endpoint {self.name}: {problem}")

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
