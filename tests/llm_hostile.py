"""Hostile replies of the test server: bodies written piece by piece, and a gzip bomb (a
chat completion that inflates to gigabytes), for the reply bounds of the grader client."""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterator
from dataclasses import dataclass

from tests.llm_shapes import (
    chat_completion,
    chat_usage,
)

HOSTILE = {"nul_500", "trickle", "huge", "gzip_bomb"}
MB = 1 << 20


@dataclass
class Streamed:
    """A body written piece by piece (a pause of `pause` seconds after each), with headers
    that may say more than is ever sent."""

    status: int
    headers: dict[str, str]
    pieces: Iterator[bytes]
    pause: float = 0.0


_BOMBS: dict[int, bytes] = {}


def gzip_bomb(inflated: int) -> bytes:
    """A gzip stream of `inflated` spaces inside a chat completion's JSON (about 1 MB per GB)."""
    if inflated not in _BOMBS:
        head, tail = completion_halves()
        packer = zlib.compressobj(9, zlib.DEFLATED, 31)  # 31: the gzip wrapper
        parts = [packer.compress(head)]
        block = b" " * MB
        for _ in range(inflated // MB):
            parts.append(packer.compress(block))
        parts += [packer.compress(tail), packer.flush()]
        _BOMBS[inflated] = b"".join(parts)
    return _BOMBS[inflated]


def completion_halves() -> tuple[bytes, bytes]:
    """A chat completion's JSON cut where its content goes."""
    usage = chat_usage(10, 0, 0, 10, 0)
    whole = json.dumps(chat_completion("grader", content="@@", refusal=None, truncated=False, usage=usage))
    head, tail = whole.split("@@")
    return head.encode(), tail.encode()
