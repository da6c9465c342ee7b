from django.apps import AppConfig


class GradingConfig(AppConfig):
    name = "grading"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Registers the Celery tasks in every process, not only in workers (where Celery's
        # autodiscovery would): the web process queues them by name (grading.pipeline.runs).
        from grading.pipeline import tasks  # noqa: F401
