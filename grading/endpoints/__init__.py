"""Curated endpoints: the curator page and its form, presets, and the write services."""
