import os

from celery import Celery, signals

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "healthbench_web.settings")

app = Celery("healthbench_web")
app.config_from_object("django.conf:settings", namespace="CELERY")
# The grading tasks live in grading.pipeline.tasks, not in an app's top-level tasks module.
app.autodiscover_tasks(lambda: ["grading.pipeline"])


@signals.setup_logging.connect
def _keep_django_logging(**kwargs) -> None:
    """Workers log through the settings' LOGGING, in the web processes' format and at LOG_LEVEL.

    Celery configures the root logger itself (its own format, level from --loglevel) unless a
    receiver of this signal exists; Django has already applied LOGGING when the app loaded."""
