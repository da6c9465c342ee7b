"""Request guards."""

from django.http import HttpRequest, HttpResponseBadRequest


class RejectNulBytes:
    """Answer 400 to a query string or JSON body holding a NUL character.

    PostgreSQL text cannot hold NUL, so a filter value with one would fail deep inside the
    database driver as a server error; no real client sends one.
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest):
        if "\x00" in request.path or any(
            "\x00" in key or any("\x00" in v for v in values) for key, values in request.GET.lists()
        ):
            return HttpResponseBadRequest("NUL bytes are not allowed in a URL.")
        if request.content_type == "application/json" and (b"\\u0000" in request.body or b"\x00" in request.body):
            return HttpResponseBadRequest("NUL characters are not allowed in a request body.")
        return self.get_response(request)
