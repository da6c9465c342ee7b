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


def broker_ping(timeout: float) -> str | None:
    """Connect to the broker once, raising its error within `timeout` seconds when it is down;
    returns the transport's name, or None for one on this machine that cannot be down."""
    url = app.conf.broker_url or ""
    if url.startswith(("filesystem://", "memory://")):
        return None
    with app.connection_for_write(connect_timeout=timeout) as conn:
        conn.ensure_connection(max_retries=1, interval_start=0, interval_step=0, timeout=timeout)
    return url.split("://", 1)[0]
