"""endpoint: set up, list and check the endpoints runs call, from the command line.

    endpoint add NAME --preset original|professional [--model M] [--key-variable V]
                 [--base-url URL] [--temperature T] [--json-schema] [--max-output-tokens N]
                 [--price-input P --price-output P]
    endpoint list
    endpoint check NAME

`add` saves through the curator form, so the same rules apply (key variables from
ENDPOINT_KEY_VARIABLES, allowed base URLs, no temperature on a reasoning model). A preset sends
what the reference grader sends; --temperature, --json-schema and --max-output-tokens are our
improvements on top, and runs using them say "differs from the reference grader".
`check` makes one real call shaped like a grader call of a run.
"""

from django.core.management.base import BaseCommand, CommandError, CommandParser

from grading.endpoints.check import endpoint_check
from grading.endpoints.forms import EndpointForm
from grading.endpoints.listing import endpoint_line, endpoint_lines
from grading.endpoints.presets import PRESETS_BY_SHORT
from grading.endpoints.services import endpoint_save
from grading.models import Endpoint


def _form_value(value):
    if value is None:
        return ""
    if isinstance(value, bool):
        return "on" if value else ""
    return str(value)


class Command(BaseCommand):
    help = "Add an endpoint from a preset, list the endpoints, or check one with a real call."

    def add_arguments(self, parser: CommandParser) -> None:
        actions = parser.add_subparsers(dest="action", required=True, metavar="add|list|check")
        add = actions.add_parser("add", help="save an endpoint from a preset (the curator form's rules)")
        add.add_argument("name")
        add.add_argument("--preset", required=True, choices=sorted(PRESETS_BY_SHORT), help="the reference grader")
        add.add_argument("--model", help="another model name than the preset's")
        add.add_argument(
            "--key-variable",
            metavar="V",
            help="the environment variable with the key (from ENDPOINT_KEY_VARIABLES); '' for a server that needs none",
        )
        add.add_argument("--base-url", metavar="URL", help="empty for OpenAI")
        add.add_argument("--temperature", type=float, help="our option: e.g. 0 (the reference: 0.5)")
        add.add_argument("--json-schema", action="store_true", help="our option: a strict JSON schema for the answer")
        add.add_argument("--max-output-tokens", type=int, metavar="N", help="output limit (0: none sent)")
        add.add_argument("--price-input", metavar="USD", help="dollars per million input tokens")
        add.add_argument("--price-output", metavar="USD", help="dollars per million output tokens")
        add.add_argument("--notes", default="")
        actions.add_parser("list", help="list the endpoints")
        check = actions.add_parser("check", help="one real call: does the key work, the model exist, the shape pass")
        check.add_argument("name")

    def handle(self, *args, **options) -> None:
        action = options["action"]
        if action == "list":
            for line in endpoint_lines():
                self.stdout.write(line)
        elif action == "add":
            self._add(options)
        else:
            endpoint = Endpoint.objects.filter(name=options["name"]).first()
            if endpoint is None:
                raise CommandError(f"no endpoint named {options['name']!r} ({self._names()})")
            result = endpoint_check(endpoint=endpoint)
            for line in result.lines:
                (self.stdout if result.ok else self.stderr).write(line)
            if not result.ok:
                raise CommandError(f"endpoint {endpoint.name} does not work yet")
            self.stdout.write(f"{endpoint.name} works.")

    def _names(self) -> str:
        names = list(Endpoint.objects.values_list("name", flat=True)[:20])
        return "endpoints: " + ", ".join(names) if names else "no endpoints yet"

    def _add(self, options) -> None:
        preset = PRESETS_BY_SHORT[options["preset"]]
        values = dict(preset.initial) | {"name": options["name"], "notes": options["notes"]}
        for option, field in (
            ("model", "model"),
            ("key_variable", "key_variable"),
            ("base_url", "base_url"),
            ("temperature", "temperature"),
            ("price_input", "price_input"),
            ("price_output", "price_output"),
        ):
            if options[option] is not None:
                values[field] = options[option]
        if options["json_schema"]:
            values["structured_output"] = True
        if options["max_output_tokens"] is not None:
            values["max_output_tokens"] = options["max_output_tokens"] or None
        if Endpoint.objects.filter(name=options["name"]).exists():
            raise CommandError(f"an endpoint named {options['name']!r} already exists; choose another name")
        form = EndpointForm(data={key: _form_value(value) for key, value in values.items()})
        if not form.is_valid():
            problems = [
                f"{'--' + name.replace('_', '-') if name != '__all__' else 'endpoint'}: {message}"
                for name, messages in form.errors.items()
                for message in messages
            ]
            raise CommandError("\n".join(problems))
        endpoint = endpoint_save(endpoint=form.instance)
        for warning in form.warnings:
            self.stderr.write(f"warning: {warning}")
        self.stdout.write(f"Saved endpoint {endpoint_line(endpoint)}")
        self.stdout.write(f"Check it with one real call: endpoint check {endpoint.name}")
