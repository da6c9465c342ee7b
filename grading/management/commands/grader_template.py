"""grader_template: store grader prompts that runs can grade with.

    grader_template import --simple-evals DIR [--name NAME]
    grader_template import --file FILE --name NAME
    grader_template list

The reference's grader prompt is not part of this product: `import --simple-evals` reads it
from your own copy of simple-evals (a checkout, or an installed copy) and stores it. Runs
graded with it (`grade --template NAME`) say "reference grader prompt" when its sha256 is the
published template's.
"""

from django.core.management.base import BaseCommand, CommandError, CommandParser

from grading.models import GraderTemplate
from grading.pipeline.grader_prompt import TemplateError, load_template
from grading.pipeline.grader_templates import (
    TemplateSaveError,
    grader_template_import_simple_evals,
    grader_template_save,
)
from grading.reference_grader import CUSTOM_PROMPT, PUBLISHED_TEMPLATE_SHA256, REFERENCE_PROMPT

DEFAULT_NAME = "simple-evals"


def _label(sha256: str) -> str:
    return REFERENCE_PROMPT if sha256 == PUBLISHED_TEMPLATE_SHA256 else CUSTOM_PROMPT


class Command(BaseCommand):
    help = "Store grader prompts (the reference's from your simple-evals copy, or a file) and list them."

    def add_arguments(self, parser: CommandParser) -> None:
        actions = parser.add_subparsers(dest="action", required=True, metavar="import|list")
        imported = actions.add_parser("import", help="store a grader template")
        source = imported.add_mutually_exclusive_group(required=True)
        source.add_argument(
            "--simple-evals", metavar="DIR", help="a simple-evals checkout or installed copy to read it from"
        )
        source.add_argument("--file", metavar="FILE", help="a template with <<conversation>> and <<rubric_item>>")
        imported.add_argument("--name", help=f"its name (default with --simple-evals: {DEFAULT_NAME})")
        actions.add_parser("list", help="list the stored templates")

    def handle(self, *args, **options) -> None:
        if options["action"] == "list":
            templates = list(GraderTemplate.objects.order_by("name"))
            if not templates:
                self.stdout.write("no grader templates yet: grader_template import --simple-evals DIR")
            for template in templates:
                self.stdout.write(f"{template.name}\t{template.sha256[:12]}\t{_label(template.sha256)}")
            return
        try:
            if options["simple_evals"]:
                name = options["name"] or DEFAULT_NAME
                template, created = grader_template_import_simple_evals(directory=options["simple_evals"], name=name)
            else:
                if not options["name"]:
                    raise CommandError("--file needs --name")
                text = load_template(options["file"])
                template, created = grader_template_save(name=options["name"], text=text, source=options["file"])
        except (TemplateSaveError, TemplateError) as exc:
            raise CommandError(str(exc)) from None
        what = "Stored" if created else "Already stored:"
        self.stdout.write(
            f"{what} grader template {template.name!r} (sha256 {template.sha256}): {_label(template.sha256)}. "
            f"Grade with it: grade ... --template {template.name}"
        )
