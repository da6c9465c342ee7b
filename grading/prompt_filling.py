"""The conversation a policy got: what the grader is shown and what ``export_run`` writes as an
example's ``prompt``. Pure Python, no Django.

simple-evals' samplers send a policy's system message before the conversation (a ``system``
message on Chat Completions, a ``developer`` one on Responses), and both its grader prompt and
its results file hold the messages as sent (``actual_queried_message_list``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def policy_turns(*, sampled: bool, parameters: Mapping[str, Any] | None) -> list[dict]:
    """The messages a sampled response's policy got before the conversation: its system
    message, if it had one. A response not sampled here (imported, written by a physician)
    had none."""
    message = (parameters or {}).get("system_message") if sampled else None
    if not message:
        return []
    role = "developer" if (parameters or {}).get("api_style") == "responses" else "system"
    return [{"role": role, "content": message}]
