from django.apps import AppConfig


class AnnotationConfig(AppConfig):
    name = "annotation"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.db.models.signals import pre_migrate

        from healthbench_web import db_text
        from healthbench_web.migration_guards import refuse_lossy_plan

        db_text.install()
        # Once per migrate (pre_migrate is sent for every app): a plan that would lose data on
        # the way back is refused before any migration is undone.
        pre_migrate.connect(refuse_lossy_plan, sender=self, dispatch_uid="refuse_lossy_plan")
