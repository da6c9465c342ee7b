"""A whole-call deadline and a cap on the bytes of a reply, for the grader's HTTP client.

The openai client's timeout (and aiohttp's under it) bounds each wait for a byte, not the
call: a server that sends its headers, then one byte a second, held a worker for ten minutes.
And the body was read whole, inflated whole: a 50 MB answer took a worker to 6 GB, a 1 MB gzip
reply inflated to 1 GB. So the client's transport is wrapped (grading/pipeline/client.py):

* connect, headers and the whole body must arrive within `seconds` of the request; past it the
  call fails as a timeout (httpx2.ReadTimeout, which the openai client reports as one);
* the body is inflated here, never by httpx above (gzip and deflate, the only encodings we
  ask for), a piece at a time with zlib's `max_length`, and counted after inflation: at more
  than `max_bytes` it stops reading and the call fails with ReplyTooLarge, so a worker never
  holds more than `max_bytes` of one reply.
"""

from __future__ import annotations

import asyncio
import zlib
from collections.abc import AsyncIterator

import httpx2

ASKED_ENCODINGS = "gzip, deflate"


class ReplyTooLarge(httpx2.ReadError):
    """A reply longer than the cap, after inflation; nothing more of it is read."""

    def __init__(self, max_bytes: int):
        super().__init__(f"reply too large: more than {max_bytes:,} bytes (GRADING_REPLY_MAX_BYTES)")
        self.max_bytes = max_bytes


class _Inflater:
    """gzip or deflate, at most `room` bytes out per call; the rest stays in zlib's tail."""

    def __init__(self, encoding: str):
        # 47 = 32 + 15: gzip or zlib, by the header. Raw deflate (a header-less "deflate"
        # some servers send) is tried when the first bytes are not a zlib header.
        self.encoding = encoding
        self.inflater = zlib.decompressobj(47 if encoding == "gzip" else zlib.MAX_WBITS)
        self.started = False

    def inflate(self, data: bytes, room: int) -> tuple[bytes, bytes]:
        """(inflated, what is left to inflate)."""
        if not self.started and self.encoding == "deflate":
            self.started = True
            try:
                return self._step(data, room)
            except zlib.error:
                self.inflater = zlib.decompressobj(-zlib.MAX_WBITS)
        self.started = True
        return self._step(data, room)

    def _step(self, data: bytes, room: int) -> tuple[bytes, bytes]:
        try:
            out = self.inflater.decompress(data, max(room, 1))
        except zlib.error as exc:
            raise httpx2.DecodingError(f"the reply's {self.encoding} body is broken: {exc}") from exc
        return out, self.inflater.unconsumed_tail


class _BoundedStream(httpx2.AsyncByteStream):
    def __init__(
        self, inner: httpx2.AsyncByteStream, *, deadline: float, seconds: float, max_bytes: int, encoding: str
    ):
        self.inner = inner
        self.deadline = deadline
        self.seconds = seconds
        self.max_bytes = max_bytes
        self.inflater = _Inflater(encoding) if encoding in ("gzip", "deflate") else None
        self.count = 0

    async def __aiter__(self) -> AsyncIterator[bytes]:
        pieces = aiter(self.inner)
        while True:
            try:
                async with asyncio.timeout_at(self.deadline):
                    piece = await anext(pieces)
            except StopAsyncIteration:
                return
            except TimeoutError:
                raise httpx2.ReadTimeout(f"the whole reply did not arrive within {self.seconds:g} s") from None
            while piece:
                room = self.max_bytes - self.count + 1
                if self.inflater is None:
                    out, piece = piece[:room], b""
                else:
                    out, piece = self.inflater.inflate(piece, room)
                self.count += len(out)
                if self.count > self.max_bytes:
                    raise ReplyTooLarge(self.max_bytes)
                if not out:
                    break  # zlib holds the rest until more input comes
                yield out

    async def aclose(self) -> None:
        await self.inner.aclose()


class BoundedTransport(httpx2.AsyncBaseTransport):
    """`inner`, with each call bounded by `seconds` (connect to last byte) and each reply by
    `max_bytes` after inflation."""

    def __init__(self, inner: httpx2.AsyncBaseTransport, *, seconds: float, max_bytes: int):
        self.inner = inner
        self.seconds = seconds
        self.max_bytes = max_bytes

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        # Only encodings inflated here: httpx would otherwise inflate brotli or zstd unbounded.
        request.headers["Accept-Encoding"] = ASKED_ENCODINGS
        deadline = asyncio.get_running_loop().time() + self.seconds
        try:
            async with asyncio.timeout_at(deadline):
                response = await self.inner.handle_async_request(request)
        except TimeoutError:
            raise httpx2.ConnectTimeout(f"no reply headers within {self.seconds:g} s") from None
        encoding = response.headers.get("content-encoding", "identity").strip().lower()
        if encoding not in ("identity", "gzip", "deflate"):
            await response.aclose()
            raise httpx2.DecodingError(f"the reply is {encoding}-encoded, which was not asked for")
        # The body goes up inflated: httpx must not inflate it again, nor trust its length.
        headers = [
            (name, value)
            for name, value in response.headers.multi_items()
            if name.lower() not in ("content-encoding", "content-length")
        ]
        stream = response.stream
        if not isinstance(stream, httpx2.AsyncByteStream):
            raise TypeError(f"{type(self.inner).__name__} gave a synchronous body")
        return httpx2.Response(
            status_code=response.status_code,
            headers=headers,
            stream=_BoundedStream(
                stream, deadline=deadline, seconds=self.seconds, max_bytes=self.max_bytes, encoding=encoding
            ),
            request=request,
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await self.inner.aclose()
