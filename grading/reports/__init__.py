"""Score reports: the HealthBench scoring rules (scoring: pure numpy), the selectors that
load a run's grades as arrays, the run report and its downloads, run comparisons, ideal
responses against their references, and the simple-evals results-file import and export.
May import grading.models and annotation's models, and of the pipeline only its read of a
run's progress (grading.pipeline.progress, which the report page shows beside the scores);
never what launches or grades (tests/test_architecture.py checks this).
"""
