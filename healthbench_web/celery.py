import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "healthbench_web.settings")

app = Celery("healthbench_web")
app.config_from_object("django.conf:settings", namespace="CELERY")
# The grading tasks live in grading.pipeline.tasks, not in an app's top-level tasks module.
app.autodiscover_tasks(lambda: ["grading.pipeline"])
