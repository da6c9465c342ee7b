"""Meta-evaluation: how far a grader agrees with physicians. Agreement maths (agreement: pure
numpy), the meta-eval and grader-label file formats and their import, selectors that load
labels as arrays, the report, its SVG charts and pages. May import grading.models,
annotation's models and annotation.formats; never the pipeline.
"""
