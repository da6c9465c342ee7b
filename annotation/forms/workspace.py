"""Forms of the physician and curator pages: each error is worded for the person who made it."""

from typing import cast

from django import forms
from django.contrib.auth.models import User
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from annotation.formats.healthbench import RowInvalid, parse_messages
from annotation.models import THEMES, Assignment, Axis, CantJudge, IdealResponse, Physician
from annotation.selectors.curation import MAX_CONVERSATIONS, ConversationStatus
from annotation.task_kinds import FIRST_OFFERED

YES_NO = [("yes", "Yes"), ("no", "No")]
# A HealthBench conversation has 1 to 19 turns.
MAX_TURNS = 19
DRAFT_ROLES = ("user", "assistant")


class CriterionForm(forms.Form):
    text = forms.CharField(
        max_length=2000,
        widget=forms.Textarea(attrs={"rows": 2, "placeholder": "e.g. Advises calling emergency services now."}),
        error_messages={"required": "Write what a response should do or avoid."},
    )
    points = forms.IntegerField(
        min_value=-10,
        max_value=10,
        widget=forms.NumberInput(attrs={"min": -10, "max": 10, "step": 1}),
        error_messages={
            "required": "Give points from -10 to 10.",
            "invalid": "Points are a whole number from -10 to 10.",
            "min_value": "Points go down to -10, no lower.",
            "max_value": "Points go up to 10, no higher.",
        },
    )
    axis = forms.ChoiceField(
        choices=[("", "Choose an axis…"), *Axis.choices],
        error_messages={"required": "Choose the axis this criterion measures."},
    )

    def clean_points(self) -> int:
        points = self.cleaned_data["points"]
        if points == 0:
            raise forms.ValidationError(
                "0 points is not allowed: a criterion rewards (1 to 10) or penalises (-1 to -10)."
            )
        return points


class IdealResponseForm(forms.Form):
    text = forms.CharField(
        max_length=20000,
        widget=forms.Textarea(attrs={"rows": 14}),
        error_messages={"required": "Write the response you would give."},
    )


CANT = "cant"


class CantJudgeFields(forms.Form):
    """The reason (and an optional note) that comes with "can't judge"."""

    reason = forms.ChoiceField(choices=CantJudge.Reason.choices, required=False)
    note = forms.CharField(required=False, max_length=2000)
    answer_field = ""

    def clean(self) -> dict:
        data = super().clean() or {}
        if data.get(self.answer_field) == CANT and not data.get("reason"):
            self.add_error("reason", "Say why you can't judge it: choose a reason.")
        return data

    @property
    def cant_judge(self) -> bool:
        return self.cleaned_data.get(self.answer_field) == CANT


class VoteForm(CantJudgeFields):
    applies = forms.ChoiceField(
        choices=[*YES_NO, (CANT, "Can't judge")], error_messages={"required": "Say whether it applies."}
    )
    answer_field = "applies"


class LabelForm(CantJudgeFields):
    met = forms.ChoiceField(
        choices=[*YES_NO, (CANT, "Can't judge")], error_messages={"required": "Choose met or not met."}
    )
    comment = forms.CharField(required=False, max_length=2000, widget=forms.Textarea(attrs={"rows": 2}))
    answer_field = "met"


class StatusForm(forms.Form):
    status = forms.ChoiceField(choices=Physician.Status.choices)


class AssignForm(forms.Form):
    kind = forms.ChoiceField(choices=Assignment.Kind.choices, initial=FIRST_OFFERED)
    theme = forms.ChoiceField(choices=[("", "Any theme"), *[(t, t) for t in THEMES]], required=False)
    subset = forms.ChoiceField(choices=[("", "Any subset")], required=False)
    status = forms.ChoiceField(choices=ConversationStatus.choices, required=False)
    limit = forms.IntegerField(
        min_value=1, max_value=MAX_CONVERSATIONS, initial=50, label=_("At most this many conversations")
    )
    specialty = forms.ChoiceField(choices=[("", "Any specialty")], required=False)
    language = forms.ChoiceField(choices=[("", "Any language")], required=False)
    physician_status = forms.ChoiceField(
        choices=[
            ("", "Active and on trial"),
            (Physician.Status.ACTIVE, "Active only"),
            (Physician.Status.TRIAL, "On trial only"),
        ],
        required=False,
    )
    per_item = forms.IntegerField(min_value=1, max_value=10, initial=2, label=_("Physicians per item"))
    condition = forms.ChoiceField(
        choices=IdealResponse.Condition.choices,
        required=False,
        initial=IdealResponse.Condition.NO_REFERENCE,
        label=_("Ideal responses: what the physician sees"),
    )

    def __init__(self, *args, subsets: list[str], specialties: list[str], languages: list[str], **kwargs):
        super().__init__(*args, **kwargs)
        for name, blank, values in (
            ("subset", "Any subset", subsets),
            ("specialty", "Any specialty", specialties),
            ("language", "Any language", languages),
        ):
            cast(forms.ChoiceField, self.fields[name]).choices = [("", blank), *[(v, v) for v in values]]

    def statuses(self) -> tuple[str, ...]:
        chosen = self.cleaned_data.get("physician_status")
        return (chosen,) if chosen else (Physician.Status.TRIAL, Physician.Status.ACTIVE)


class ExternalLinkForm(forms.Form):
    """Which external physician, and which account their labels follow."""

    external = forms.CharField(
        max_length=64,
        label=_("External physician (anonymised id, or its first 8 or more characters)"),
        error_messages={"required": "Give the external physician's anonymised id."},
    )
    username = forms.CharField(
        max_length=150, label=_("Account (user name)"), error_messages={"required": "Give the account's user name."}
    )

    def clean_external(self) -> Physician:
        wanted = self.cleaned_data["external"].strip().lower().removeprefix("anon:")
        if len(wanted) < 8:
            raise forms.ValidationError(_("Give at least the first 8 characters of the anonymised id."))
        found = list(
            Physician.objects.filter(
                role=Physician.Role.PHYSICIAN, user__isnull=True, anonymized_id__startswith=wanted
            ).order_by("id")[:2]
        )
        if not found:
            raise forms.ValidationError(_("No external physician's anonymised id starts with %(id)s.") % {"id": wanted})
        if len(found) > 1:
            raise forms.ValidationError(
                _("More than one external physician's id starts with %(id)s: give more of it.") % {"id": wanted}
            )
        return found[0]

    def clean_username(self) -> User:
        name = self.cleaned_data["username"].strip()
        try:
            return User.objects.get(username=name)
        except User.DoesNotExist:
            raise forms.ValidationError(
                _("No account is called %(name)s. Create it in the admin first, then link it here.") % {"name": name}
            ) from None


class DraftForm:
    """A drafted conversation: a theme and turns posted as parallel `role` / `content` lists.

    Not a Django form because the number of turns varies; the message rules are those of the
    HealthBench file format (annotation/formats/healthbench.py), so a drafted conversation can
    always be exported.
    """

    def __init__(self, data=None):
        self.data = data
        self.theme = ""
        self.turns: list[dict[str, str]] = [{"role": "user", "content": ""}]
        # Form-wide errors by name ("theme", "turns"); a turn's own error is in turn["error"].
        self.errors: dict[str, str] = {}
        if data is not None:
            self.theme = data.get("theme", "")
            roles, contents = data.getlist("role"), data.getlist("content")
            # Pairs as posted; a forged request with unequal lists loses its unpaired tail.
            pairs = zip(roles, contents, strict=False)
            self.turns = [{"role": r, "content": c} for r, c in pairs][: MAX_TURNS + 1]

    def add_turn(self) -> None:
        if len(self.turns) < MAX_TURNS:
            last = self.turns[-1]["role"] if self.turns else "assistant"
            self.turns.append({"role": "assistant" if last == "user" else "user", "content": ""})

    def remove_turn(self) -> None:
        if len(self.turns) > 1:
            self.turns.pop()

    @property
    def themes(self) -> list[str]:
        return THEMES

    def is_valid(self) -> bool:
        self.errors = {}
        if self.theme not in THEMES:
            self.errors["theme"] = gettext("Choose the theme this conversation tests.")
        if len(self.turns) > MAX_TURNS:
            self.errors["turns"] = gettext("A conversation has at most %(max)s turns.") % {"max": MAX_TURNS}
        for turn in self.turns:
            turn["content"] = turn["content"].strip()
            turn.pop("error", None)
            if turn["role"] not in DRAFT_ROLES:
                turn["error"] = "Each turn is from the user or the assistant."
            elif not turn["content"]:
                turn["error"] = "Write this turn, or remove it."
            elif "\x00" in turn["content"]:
                # PostgreSQL text cannot hold NUL; Django's own CharField refuses it the same way.
                turn["error"] = "Null characters are not allowed."
        turn_errors = any("error" in t for t in self.turns)
        if not turn_errors and "turns" not in self.errors:
            try:
                # The file format's own message rules (non-empty, known roles, ends with a user turn).
                parse_messages(0, self.turns)
            except RowInvalid as exc:
                self.errors["turns"] = _turn_message(exc)
        return not self.errors and not turn_errors

    def messages(self) -> list[dict[str, str]]:
        return [{"content": t["content"], "role": t["role"]} for t in self.turns]


def _turn_message(exc: RowInvalid) -> str:
    message = exc.error.message
    if "end with a user turn" in message:
        return "The conversation must end with a user turn: the model answers that last message."
    return message[:1].upper() + message[1:] + "."
