"""Score reports: the HealthBench scoring rules (scoring: pure numpy), the selectors that
load a run's grades as arrays, the run report and its downloads, run comparisons, ideal
responses against their references, and the simple-evals results-file import and export.
May import grading.models and annotation's models; never the pipeline.
"""
