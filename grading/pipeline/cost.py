"""Dollars from tokens: plain arithmetic on an endpoint's (or a snapshot's) prices.

Prices are per million tokens. Providers count cached input tokens inside the prompt
tokens and reasoning tokens inside the completion tokens (OpenAI's usage fields do), so:
cost = (prompt − cached) × input + cached × cached input + completion × output. With no
cached-input price, cached tokens cost the input price. No input or output price: the cost
is unknown (None), never $0. Answers through the provider's Batch API cost its discount off
every price (``Prices.batched``).
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any

MILLION = Decimal(1_000_000)


@dataclass(frozen=True)
class Prices:
    input: Decimal | None
    cached_input: Decimal | None
    output: Decimal | None

    @classmethod
    def of(cls, priced: Any) -> Prices:
        """From anything with price_input, price_cached_input and price_output (None: none)."""
        if priced is None:
            return cls(None, None, None)
        return cls(priced.price_input, priced.price_cached_input, priced.price_output)

    def batched(self, discount: Decimal | None) -> Prices:
        """The prices through the provider's Batch API, `discount` off each (None: these)."""
        if discount is None:
            return self
        keep = 1 - Decimal(discount)
        return Prices(*(None if p is None else p * keep for p in (self.input, self.cached_input, self.output)))

    @property
    def known(self) -> bool:
        return self.input is not None and self.output is not None


def cost_of(prices: Prices, *, prompt_tokens: int, cached_tokens: int, completion_tokens: int) -> Decimal | None:
    if prices.input is None or prices.output is None:
        return None
    cached = min(max(0, cached_tokens), prompt_tokens)
    cached_price = prices.input if prices.cached_input is None else prices.cached_input
    dollars = (
        Decimal(prompt_tokens - cached) * prices.input
        + Decimal(cached) * cached_price
        + Decimal(completion_tokens) * prices.output
    ) / MILLION
    return dollars.quantize(Decimal("0.000001"))
