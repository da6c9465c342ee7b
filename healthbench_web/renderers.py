"""The API's JSON renderer, which survives text that cannot be encoded."""

from typing import Any

from rest_framework.renderers import JSONRenderer

from annotation.formats.validation import replace_bad_text


class SafeJSONRenderer(JSONRenderer):
    """DRF's JSON renderer; a lone surrogate anywhere in the data becomes U+FFFD instead of a 500.

    Stored JSON is repaired as it is read (annotation.fields), so this is the last guard for
    a value that reached a response some other way.
    """

    def render(self, data: Any, accepted_media_type: str | None = None, renderer_context: Any = None) -> bytes:
        try:
            return super().render(data, accepted_media_type, renderer_context)
        except UnicodeEncodeError:
            return super().render(replace_bad_text(data), accepted_media_type, renderer_context)
