"""The curator's form for marking a gold item on one conversation."""

from typing import cast

from django import forms
from django.utils.translation import gettext_lazy as _

from annotation.grading_seam import Response
from annotation.models import ConsensusCriterion, Conversation, Criterion, GoldItem


class GoldConversationForm(forms.Form):
    conversation = forms.CharField(label=_("Conversation (prompt id)"), max_length=100)

    def clean_conversation(self) -> Conversation:
        prompt_id = self.cleaned_data["conversation"].strip()
        found = Conversation.objects.filter(prompt_id=prompt_id).first()
        if found is None:
            raise forms.ValidationError(f"No conversation has the prompt id {prompt_id!r}.")
        return found


class GoldEditForm(forms.ModelForm):
    """A gold item's known answer and rationale, changed. The item itself stays: to gold another
    item, remove this one and mark that one."""

    known = forms.ChoiceField(
        choices=[("yes", _("Yes: met / applies")), ("no", _("No: not met / does not apply"))],
        widget=forms.RadioSelect,
        label=_("Known answer"),
    )

    class Meta:
        model = GoldItem
        fields = ["rationale"]
        widgets = {"rationale": forms.Textarea(attrs={"rows": 3, "dir": "auto"})}

    field_order = ["known", "rationale"]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["known"].initial = "yes" if self.instance.answer else "no"
        self.fields["rationale"].help_text = _(
            "Shown to the physician right after they answer (at most 1000 characters)."
        )

    @property
    def answer_changes(self) -> bool:
        """Whether the known answer, not only the rationale, is being changed (after is_valid)."""
        return (self.cleaned_data.get("known") == "yes") != self.instance.answer

    def save(self, commit: bool = True) -> GoldItem:
        self.instance.answer = self.cleaned_data["known"] == "yes"
        return super().save(commit=commit)


class ResponseChoiceField(forms.ModelChoiceField):
    def label_from_instance(self, obj) -> str:
        return f"{obj.model_name or obj.source} #{obj.sample_index}: {obj.text[:60]}"


class GoldItemForm(forms.ModelForm):
    """A labeling item (a model response and an attached consensus criterion) or a voting item
    (a catalogue entry of the conversation's theme), its known answer and why. The model's
    clean() and constraints check the rest, as in the admin."""

    KINDS = [
        ("label", _("Labeling item: does a response meet a criterion?")),
        ("vote", _("Voting item: does a consensus criterion apply?")),
    ]

    kind = forms.ChoiceField(choices=KINDS, widget=forms.RadioSelect, label=_("Kind of item"))
    known = forms.ChoiceField(
        choices=[("yes", _("Yes: met / applies")), ("no", _("No: not met / does not apply"))],
        widget=forms.RadioSelect,
        label=_("Known answer"),
    )

    field_order = ["kind", "response", "criterion", "consensus_criterion", "known", "rationale"]

    class Meta:
        model = GoldItem
        fields = ["response", "criterion", "consensus_criterion", "rationale"]
        field_classes = {"response": ResponseChoiceField}
        widgets = {"rationale": forms.Textarea(attrs={"rows": 3, "dir": "auto"})}
        labels = {
            "response": _("Response (labeling item)"),
            "criterion": _("Criterion (labeling item)"),
            "consensus_criterion": _("Consensus criterion (voting item)"),
        }

    def __init__(self, *args, conversation: Conversation, **kwargs):
        super().__init__(*args, **kwargs)
        self.instance.conversation = conversation
        response = cast(forms.ModelChoiceField, self.fields["response"])
        response.queryset = Response.objects.filter(conversation=conversation).exclude(source=Response.Source.PHYSICIAN)
        cast(forms.ModelChoiceField, self.fields["criterion"]).queryset = Criterion.objects.filter(
            conversation=conversation, level=Criterion.Level.CLUSTER
        )
        cast(forms.ModelChoiceField, self.fields["consensus_criterion"]).queryset = ConsensusCriterion.objects.filter(
            theme=conversation.theme
        )
        self.fields["rationale"].help_text = _(
            "Shown to the physician right after they answer (at most 1000 characters)."
        )

    def clean(self) -> dict:
        data = super().clean() or {}
        kind = data.get("kind")
        if kind == "label":
            for name in ("response", "criterion"):
                if not data.get(name):
                    self.add_error(name, "A labeling item needs a response and a criterion.")
            data["consensus_criterion"] = None
        elif kind == "vote":
            if not data.get("consensus_criterion"):
                self.add_error("consensus_criterion", "A voting item needs a consensus criterion.")
            data["response"] = data["criterion"] = None
        entry = data.get("consensus_criterion")
        if (
            kind == "vote"
            and entry
            and GoldItem.objects.filter(conversation=self.instance.conversation, consensus_criterion=entry).exists()
        ):
            self.add_error("consensus_criterion", "This voting item is already gold.")
        if "known" in data:
            self.instance.answer = data["known"] == "yes"
        return data
