"""The test server's rate limits as OpenAI enforces them: a token bucket per minute for
requests and tokens, the x-ratelimit-* headers on every reply and the 429 with its message."""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING

from tests.llm_shapes import (
    REQUESTS_PER_MINUTE,
    TOKENS_PER_MINUTE,
    api_error,
)

if TYPE_CHECKING:
    from tests.llm_server import LLMServer


def reset_text(seconds: float) -> str:
    """A wait as OpenAI's x-ratelimit-reset-* headers write it: "120ms", "1.5s", "6m0s"."""
    if seconds < 1:
        return f"{max(1, round(seconds * 1000))}ms"
    if seconds < 60:
        return f"{seconds:.3g}s"
    return f"{int(seconds // 60)}m{seconds % 60:.0f}s"


def admit(self: LLMServer, model: str, tokens: int) -> tuple[tuple[int, dict, dict] | None, dict]:
    """(OpenAI's 429 when a limit is spent, else None; the rate-limit headers of the reply)."""
    with self.lock:
        now = time.monotonic()
        cap_r, cap_t = self.rpm * self.rate_window / 60, self.tpm * self.rate_window / 60
        r, t, last = self.bucket or (cap_r, cap_t, now)
        r = min(cap_r, r + (now - last) * self.rpm / 60)
        t = min(cap_t, t + (now - last) * self.tpm / 60)
        spent = None
        if self.rpm and r < 1:
            spent = ("requests", "RPM", self.rpm, (1 - r) * 60 / self.rpm, round(cap_r - r), 1)
        elif self.tpm and t < tokens:
            spent = ("tokens", "TPM", self.tpm, (tokens - t) * 60 / self.tpm, round(cap_t - t), tokens)
        else:
            r, t = r - (1 if self.rpm else 0), t - (tokens if self.tpm else 0)
        self.bucket = (r, t, now)
        self.arrivals.append((time.time(), 429 if spent else 200))
        headers = {
            "x-ratelimit-limit-requests": str(self.rpm or REQUESTS_PER_MINUTE),
            "x-ratelimit-remaining-requests": str(max(0, int(r)) if self.rpm else 9_999),
            "x-ratelimit-reset-requests": reset_text(max(0.0, cap_r - r) * 60 / self.rpm if self.rpm else 0.006),
            "x-ratelimit-limit-tokens": str(self.tpm or TOKENS_PER_MINUTE),
            "x-ratelimit-remaining-tokens": str(max(0, int(t)) if self.tpm else 29_999_000),
            "x-ratelimit-reset-tokens": reset_text(max(0.0, cap_t - t) * 60 / self.tpm if self.tpm else 0.006),
        }
    if spent is None:
        return None, headers
    what, short, limit, wait, used, requested = spent
    message = (
        f"Rate limit reached for {model} in organization org-test on {what} per min ({short}): Limit {limit}, "
        f"Used {used}, Requested {requested}. Please try again in {reset_text(wait)}. "
        "Visit https://platform.openai.com/account/rate-limits to learn more."
    )
    _, _, error = api_error(429, message, kind=what, code="rate_limit_exceeded")
    if self.send_retry_after:
        headers |= {"retry-after-ms": str(math.ceil(wait * 1000)), "retry-after": str(math.ceil(wait))}
    return (429, headers, error), headers
