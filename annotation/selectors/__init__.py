"""Reads shaped for pages: plain querysets and small dataclasses, no writes."""
