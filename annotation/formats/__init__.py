"""The public HealthBench eval file: the row reader and writer (healthbench, pure Python),
merging a row's rubric into stored criteria (rubric_merge), and the database import and
export built on them. Byte-for-byte round trips are this package's promise.
"""
