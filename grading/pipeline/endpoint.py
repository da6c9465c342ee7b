"""An endpoint as one call sees it: a plain, frozen value that the event loop can hold and
that the rate limiter keys on. Built from the stored configuration by the batch service."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from grading.models import GraderConfig


class EndpointConfigError(Exception):
    """A configuration that cannot work at all, e.g. its API key variable is not set."""


@dataclass(frozen=True)
class Endpoint:
    """What a call needs from a GraderConfig, as a plain value the event loop can hold."""

    base_url: str
    model: str
    api_key_env: str
    temperature: float
    max_tokens: int
    timeout: float
    requests_per_minute: int | None = None
    tokens_per_minute: int | None = None

    @classmethod
    def of(cls, config: GraderConfig) -> Endpoint:
        return cls(
            base_url=config.base_url,
            model=config.model,
            api_key_env=config.api_key_env,
            temperature=config.temperature,
            max_tokens=config.max_tokens,
            timeout=config.timeout_seconds,
            requests_per_minute=config.requests_per_minute,
            tokens_per_minute=config.tokens_per_minute,
        )

    def api_key(self) -> str:
        """The key from the named environment variable. No name: a local server that wants none."""
        if not self.api_key_env:
            return "unused"
        key = os.environ.get(self.api_key_env, "")
        if not key:
            raise EndpointConfigError(f"the environment variable {self.api_key_env} (the API key) is not set")
        return key

    @property
    def limit_key(self) -> str:
        """Providers limit per model and key; we know the model and where it is served."""
        return f"{self.base_url or 'openai'}|{self.model}|{self.api_key_env}"
