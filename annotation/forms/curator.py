from typing import cast

from django import forms
from django.utils.translation import gettext_lazy as _

from annotation.formats.importer import SUBSET_NAME
from annotation.formats.validation import MAX_UPLOAD_BYTES
from annotation.models import THEMES, Conversation, Subset

MB = 1024 * 1024
NAME_RULE = _("Use lowercase letters, digits, '-' and '_', starting with a letter or digit.")


class ImportForm(forms.Form):
    file = forms.FileField(help_text=_("A HealthBench eval JSONL file: main, Hard or Consensus."))
    subset = forms.CharField(
        required=False, max_length=100, help_text=_("Also add every conversation to this subset (optional).")
    )

    def clean_file(self):
        upload = self.cleaned_data["file"]
        if upload.size > MAX_UPLOAD_BYTES:
            raise forms.ValidationError(
                _(
                    "The file is %(size)s MB; the browser import takes at most %(limit)s MB."
                    " Import larger files with manage.py import_healthbench FILE."
                )
                % {"size": format(upload.size / MB, ",.1f"), "limit": MAX_UPLOAD_BYTES // MB}
            )
        return upload

    def clean_subset(self):
        name = self.cleaned_data["subset"].strip()
        if name and not SUBSET_NAME.match(name):
            raise forms.ValidationError(NAME_RULE)
        return name or None


class SubsetCreateForm(forms.Form):
    # What each kind is for, shown beside the choice on the page.
    KINDS = [
        (Subset.Kind.CUSTOM, "Custom: members you choose by filter or by hand"),
        (
            Subset.Kind.CONSENSUS,
            "Consensus: rebuilt from the consensus criteria attached; graded and exported on those only",
        ),
        (Subset.Kind.HARD, "Hard: built from the lowest-scoring conversations of runs you pick"),
    ]
    name = forms.CharField(max_length=100)
    kind = forms.ChoiceField(
        choices=KINDS, initial=Subset.Kind.CUSTOM, widget=forms.RadioSelect, label=_("Kind"), required=False
    )
    description = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}))

    def clean_name(self):
        name = self.cleaned_data["name"].strip()
        if not SUBSET_NAME.match(name):
            raise forms.ValidationError(NAME_RULE)
        if Subset.objects.filter(name=name).exists():
            raise forms.ValidationError(_("A subset named %(name)s already exists.") % {"name": repr(name)})
        return name

    def clean_kind(self) -> str:
        return self.cleaned_data["kind"] or Subset.Kind.CUSTOM


class SubsetFilterForm(forms.Form):
    MODES = [("add", "Add the matches to the subset"), ("replace", "Replace the members with the matches")]
    themes = forms.MultipleChoiceField(
        choices=[(t, t) for t in THEMES], required=False, widget=forms.CheckboxSelectMultiple
    )
    from_subsets = forms.ModelMultipleChoiceField(
        queryset=Subset.objects.all(), to_field_name="name", required=False, label=_("In subsets")
    )
    has_cluster = forms.ChoiceField(
        choices=[("", "Either"), ("yes", "Has consensus criteria"), ("no", "Has none")], required=False
    )
    min_turns = forms.IntegerField(min_value=1, max_value=99, required=False)
    mode = forms.ChoiceField(choices=MODES, initial="add")


class PromptIdsForm(forms.Form):
    prompt_ids = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), help_text=_("One prompt_id per line."))
    action = forms.ChoiceField(choices=[("add", "Add"), ("remove", "Remove")])

    def clean_prompt_ids(self) -> list[str]:
        wanted = [line.strip() for line in self.cleaned_data["prompt_ids"].splitlines() if line.strip()]
        if not wanted:
            raise forms.ValidationError(_("Give one prompt_id per line."))
        return list(dict.fromkeys(wanted))

    def found(self) -> tuple[list[int], list[str]]:
        """(ids of the conversations named, in the order given; the prompt_ids that name none)."""
        wanted = self.cleaned_data["prompt_ids"]
        ids = dict(Conversation.objects.filter(prompt_id__in=wanted).values_list("prompt_id", "id"))
        return [ids[p] for p in wanted if p in ids], [p for p in wanted if p not in ids]


class HardBuildForm(forms.Form):
    runs: forms.ModelMultipleChoiceField = forms.ModelMultipleChoiceField(
        queryset=None,
        to_field_name="name",
        help_text=_("The runs whose scores decide which conversations are hard."),
    )
    n = forms.IntegerField(min_value=1, initial=1000, label=_("How many conversations"))

    def __init__(self, *args, **kwargs):
        # Imported here: the seam reaches into grading, whose models import annotation's.
        from annotation.grading_seam import rankable_runs

        super().__init__(*args, **kwargs)
        cast(forms.ModelMultipleChoiceField, self.fields["runs"]).queryset = rankable_runs()
