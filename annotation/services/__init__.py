"""Writes that touch several models: keyword-only `<entity>_<verb>` functions, each one transaction."""
