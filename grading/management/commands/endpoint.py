"""endpoint: set up, list and check the endpoints runs call, from the command line.

    endpoint add NAME --preset original|professional [--model M] [--key-variable V]
                 [--base-url URL] [--api-style chat|responses] [--reasoning | --no-reasoning]
                 [--reasoning-effort E] [--temperature T] [--json-schema] [--max-output-tokens N]
                 [--system-message TEXT] [--timeout S] [--price-input P --price-output P]
                 [--price-cached-input P] [--batch-discount D | --no-batch]
                 [--rpm N] [--tpm N] [--concurrency N] [--provider openai|azure]
                 [--api-version V] [--key-header NAME] [--header 'NAME: VALUE' ...]
                 [--query 'NAME: VALUE' ...] [--lenient-answers | --strict-answers]
    endpoint list
    endpoint check NAME [--grading-mode per-criterion|per-response] [--template NAME] [--batch]

`add` saves through the curator form, so the same rules apply (key variables from
ENDPOINT_KEY_VARIABLES, allowed base URLs, no temperature on a reasoning model) and takes every
option the Endpoints page has. The presets' Batch API discount (OpenAI's) is kept only for a
provider with a Batch API (OpenAI, Azure OpenAI) unless --batch-discount says otherwise. A preset sends
what the reference grader sends; --temperature, --json-schema and --max-output-tokens are our
improvements on top, and runs using them say "differs from the reference grader".
`check` asks one real grader question, shaped and filled as a run's grader call (the built-in
grader prompt, or the stored template --template names), and says the endpoint works only when
the answer holds a verdict a run could read. With --batch it also tries the Batch API: the same
request uploaded as a one-line batch file, a batch created of it and cancelled at once.
"""

from django.core.management.base import BaseCommand, CommandError, CommandParser

from grading.endpoint_rules import has_batch_api
from grading.endpoints.batch_check import endpoint_batch_check
from grading.endpoints.check import CheckResult, endpoint_check
from grading.endpoints.forms import EndpointForm
from grading.endpoints.listing import endpoint_line, endpoint_lines
from grading.endpoints.presets import PRESETS_BY_SHORT
from grading.endpoints.services import endpoint_save
from grading.models import Endpoint, GraderTemplate
from grading.pipeline.grader_prompt import DEFAULT_TEMPLATE
from grading.pipeline.modes import DEFAULT, MODES, mode_of

# The option that sets a form field, where its name is not the field's.
OPTION_OF = {
    "__all__": "endpoint",
    "extra_headers_text": "--header",
    "extra_query_text": "--query",
    "max_concurrency": "--concurrency",
    "requests_per_minute": "--rpm",
    "tokens_per_minute": "--tpm",
    "timeout_seconds": "--timeout",
    "max_output_tokens": "--max-output-tokens",
    "structured_output": "--json-schema",
}


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
        add.add_argument("--api-style", choices=["chat", "responses"], help="Chat Completions or the Responses API")
        reasoning = add.add_mutually_exclusive_group()
        reasoning.add_argument("--reasoning", action="store_true", default=None, help="a reasoning model")
        reasoning.add_argument("--no-reasoning", dest="reasoning", action="store_false", help="not a reasoning model")
        add.add_argument("--reasoning-effort", metavar="E", help="a reasoning model's effort (e.g. low, medium, high)")
        add.add_argument("--temperature", type=float, help="our option: e.g. 0 (the reference: 0.5)")
        add.add_argument("--json-schema", action="store_true", help="our option: a strict JSON schema for the answer")
        add.add_argument("--max-output-tokens", type=int, metavar="N", help="output limit (0: none sent)")
        add.add_argument("--price-input", metavar="USD", help="dollars per million input tokens")
        add.add_argument("--price-output", metavar="USD", help="dollars per million output tokens")
        add.add_argument("--price-cached-input", metavar="USD", help="dollars per million cached input tokens")
        batch = add.add_mutually_exclusive_group()
        batch.add_argument("--batch-discount", metavar="D", help="the Batch API's share off every price (OpenAI: 0.5)")
        batch.add_argument("--no-batch", action="store_true", help="no Batch API here: runs are graded live only")
        add.add_argument("--system-message", metavar="TEXT", help="sent before every conversation ('' for none)")
        add.add_argument("--timeout", type=float, metavar="S", help="seconds a call may take")
        add.add_argument("--rpm", type=int, metavar="N", help="requests per minute the provider allows")
        add.add_argument("--tpm", type=int, metavar="N", help="tokens per minute the provider allows")
        add.add_argument("--concurrency", type=int, metavar="N", help="calls in flight at once per run")
        add.add_argument("--provider", choices=["openai", "azure"], help="azure: Azure OpenAI (classic or v1)")
        add.add_argument(
            "--api-version", metavar="V", help="Azure OpenAI's classic API version (e.g. 2024-10-21); none: its v1 API"
        )
        add.add_argument(
            "--key-header",
            metavar="NAME",
            help="the header that carries the key: Authorization (a bearer token), or a gateway's own",
        )
        add.add_argument(
            "--header",
            action="append",
            default=[],
            metavar="'NAME: VALUE'",
            help="an extra header (repeat it); a secret as env:VARIABLE from ENDPOINT_KEY_VARIABLES",
        )
        add.add_argument(
            "--query", action="append", default=[], metavar="'NAME: VALUE'", help="an extra query parameter (repeat it)"
        )
        answers = add.add_mutually_exclusive_group()
        answers.add_argument(
            "--lenient-answers",
            dest="lenient_answers",
            action="store_true",
            default=None,
            help="also read a verdict with text around it or in any fence (the presets read as simple-evals does)",
        )
        answers.add_argument(
            "--strict-answers", dest="lenient_answers", action="store_false", help="read answers as simple-evals does"
        )
        add.add_argument("--notes", default="")
        actions.add_parser("list", help="list the endpoints")
        self._check_arguments(actions)

    @staticmethod
    def _check_arguments(actions) -> None:
        """The options of `endpoint check`."""
        check = actions.add_parser("check", help="one real call: does the key work, the model exist, the shape pass")
        check.add_argument("name")
        check.add_argument(
            "--grading-mode",
            choices=list(MODES),
            default=DEFAULT,
            help="ask as a run in this mode would (default: per-criterion)",
        )
        check.add_argument(
            "--template",
            metavar="NAME",
            help="fill this stored grader template (grader_template list), as a run with it would; "
            "default: the built-in grader prompt",
        )
        check.add_argument(
            "--batch",
            action="store_true",
            help="also try the Batch API: upload the same request as a one-line batch file, create a batch "
            "of it and cancel it at once (nothing is graded)",
        )

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
            template = self._template(options)
            result = endpoint_check(endpoint=endpoint, mode=options["grading_mode"], template=template)
            if options["batch"]:
                batch = endpoint_batch_check(endpoint=endpoint, mode=options["grading_mode"], template=template)
                result = CheckResult(result.ok and batch.ok, result.lines + batch.lines)
            for line in result.lines:
                (self.stdout if result.ok else self.stderr).write(line)
            if not result.ok:
                raise CommandError(f"endpoint {endpoint.name} does not work yet")
            self.stdout.write(f"{endpoint.name} works.")

    def _template(self, options) -> str:
        name = options["template"]
        if not name:
            return DEFAULT_TEMPLATE
        if not mode_of(options["grading_mode"]).fills_template:
            raise CommandError(
                f"--template fills a per-criterion prompt; {options['grading_mode']} grading has its own prompt"
            )
        template = GraderTemplate.objects.filter(name=name).first()
        if template is None:
            known = ", ".join(GraderTemplate.objects.values_list("name", flat=True)) or "none yet"
            raise CommandError(
                f"no grader template named {name!r} (stored: {known}; add one with grader_template import)"
            )
        return template.text

    def _names(self) -> str:
        names = list(Endpoint.objects.values_list("name", flat=True)[:20])
        return "endpoints: " + ", ".join(names) if names else "no endpoints yet"

    def _add(self, options) -> None:
        preset = PRESETS_BY_SHORT[options["preset"]]
        values = dict(preset.initial) | {"name": options["name"], "notes": options["notes"]}
        if options["base_url"] and not has_batch_api(options["base_url"]):
            values["batch_discount"] = None  # the preset's is OpenAI's: this provider has no Batch API
        if options["reasoning"] is False:
            values |= {"reasoning": False, "reasoning_effort": ""}
        elif options["reasoning"] and options["temperature"] is None:
            values["temperature"] = None  # the preset's is not for a reasoning model
        for option, field in (
            ("model", "model"),
            ("key_variable", "key_variable"),
            ("base_url", "base_url"),
            ("api_style", "api_style"),
            ("reasoning", "reasoning"),
            ("reasoning_effort", "reasoning_effort"),
            ("temperature", "temperature"),
            ("price_input", "price_input"),
            ("price_cached_input", "price_cached_input"),
            ("price_output", "price_output"),
            ("batch_discount", "batch_discount"),
            ("system_message", "system_message"),
            ("timeout", "timeout_seconds"),
            ("rpm", "requests_per_minute"),
            ("tpm", "tokens_per_minute"),
            ("concurrency", "max_concurrency"),
            ("provider", "provider"),
            ("api_version", "api_version"),
            ("key_header", "key_header"),
            ("lenient_answers", "lenient_answers"),
        ):
            if options[option] is not None:
                values[field] = options[option]
        values["extra_headers_text"] = "\n".join(options["header"])
        values["extra_query_text"] = "\n".join(options["query"])
        if options["no_batch"]:
            values["batch_discount"] = None
        if options["json_schema"]:
            values["structured_output"] = True
        if options["max_output_tokens"] is not None:
            values["max_output_tokens"] = options["max_output_tokens"] or None
        if Endpoint.objects.filter(name=options["name"]).exists():
            raise CommandError(f"an endpoint named {options['name']!r} already exists; choose another name")
        form = EndpointForm(data={key: _form_value(value) for key, value in values.items()})
        if not form.is_valid():
            problems = [
                f"{OPTION_OF.get(name, '--' + name.replace('_', '-'))}: {message}"
                for name, messages in form.errors.items()
                for message in messages
            ]
            raise CommandError("\n".join(problems))
        endpoint = endpoint_save(endpoint=form.instance)
        for warning in form.warnings:
            self.stderr.write(f"warning: {warning}")
        self.stdout.write(f"Saved endpoint {endpoint_line(endpoint)}")
        self.stdout.write(f"Check it with one real call: endpoint check {endpoint.name}")
