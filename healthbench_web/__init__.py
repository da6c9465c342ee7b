import os

# Reports resample with one matrix product (grading.reports.scoring). OpenBLAS's own thread pool
# then fights the other web and worker processes for the same cores: measured 3.5x slower on a
# busy two-core machine than one thread (bench/report_page_bench.py). One thread per process
# unless the operator sets these; they must be set before numpy is first imported.
for _variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")

from healthbench_web.celery import app as celery_app  # noqa: E402 (after the thread limits above)

__all__ = ["celery_app"]
