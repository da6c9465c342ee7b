"""Provider text made storable before it is stored: the one door every provider error, run or
batch failure reason, raw grader answer and sampled response passes through.

A provider (or anything between us and it) can send a NUL byte, bytes that are not UTF-8
(decoded with replacement or surrogate escapes, they reach us as U+FFFD or lone surrogates)
and any length. PostgreSQL refuses NUL and lone surrogates outright, and the write that
carried them failed: once, inside `run_fail`, the task raised and the lease sweep queued the
run's batches again, for ever. So every such character becomes U+FFFD, and the text is cut to
a documented length, marked with "…" (README, "What a run stores"):

* a grader's raw answer or explanation: RAW_ANSWER_CHARS (65,536);
* an error or a failure reason: REASON_CHARS (4,000);
* a sampled response: RESPONSE_CHARS (262,144), far above any output limit of a preset.

Pure: no Django.
"""

import re

RAW_ANSWER_CHARS = 65_536
REASON_CHARS = 4_000
RESPONSE_CHARS = 262_144

# NUL and the surrogate range (never valid alone in UTF-8; Python's surrogateescape puts
# undecodable bytes there).
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
MARK = "…"


def storable(text: object, cap: int) -> str:
    """`text` with NUL and lone surrogates replaced by U+FFFD and at most `cap` characters
    (the last one "…" when cut). Bytes are decoded as UTF-8 with replacement; None is ""."""
    if text is None:
        return ""
    if isinstance(text, bytes | bytearray):
        text = bytes(text[: cap * 4]).decode("utf-8", errors="replace")
    elif not isinstance(text, str):
        text = str(text)
    if len(text) > cap:
        text = text[: max(cap - len(MARK), 0)] + MARK
    return _UNSTORABLE.sub("\ufffd", text)
