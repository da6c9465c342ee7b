"""Endpoints on the test LLM server (tests/llm_server.py), as a curator would set them up."""

from grading.models import Endpoint


def endpoint_on(server, name: str = "test-grader", *, model: str = "grader", **fields) -> Endpoint:
    """An endpoint on `server` that needs no key unless `key_variable` is given."""
    values = {"base_url": server.url, "model": model, "key_variable": "", "timeout_seconds": 2.0}
    if fields.get("reasoning"):
        values["temperature"] = None
    return Endpoint.objects.create(name=name, **(values | fields))
