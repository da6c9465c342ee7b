"""Frozen subset versions: members and their rubrics as they were, with a content hash.

A run names the version it graded, so a score can always be traced to the exact rubrics
behind it, however the live subset or rubrics change afterwards.
"""

import hashlib
from collections.abc import Iterator

from django.db import transaction
from django.db.models import Max

from annotation.formats.exporter import export_subset_entries, format_conversation_row
from annotation.formats.healthbench import IdealData, RubricItem
from annotation.models import Conversation, IdealResponse, Physician, Subset, SubsetVersion

BATCH = 500


class SubsetEmpty(ValueError):
    """A version of nothing would name no conversations: freezing it is refused."""


def subset_version_freeze(*, subset: Subset, frozen_by: Physician | None = None) -> tuple[SubsetVersion, bool]:
    """Freeze the subset as it is now; return (version, created).

    Freezing an unchanged subset again returns its latest version instead of a copy.
    """
    with transaction.atomic():
        # Lock the subset row so two curators freezing at once get numbers 1 and 2, not 1 twice.
        subset = Subset.objects.select_for_update().get(pk=subset.pk)
        if not subset.members.exists():
            raise SubsetEmpty(f"{subset.name} has no members: add conversations before freezing it")
        digest = hashlib.sha256()
        snapshot = []
        for line, prompt_id, rubrics in export_subset_entries(subset):
            digest.update(line.encode() + b"\n")
            # The rubric in the HealthBench file's terms, whichever shape the line has.
            items = [{"criterion": r.criterion, "points": r.points, "tags": list(r.tags)} for r in rubrics]
            snapshot.append({"prompt_id": prompt_id, "rubrics": items})
        content_hash = digest.hexdigest()
        latest = subset.versions.order_by("-number").first()
        if latest is not None and latest.content_hash == content_hash:
            return latest, False
        number = (subset.versions.aggregate(n=Max("number"))["n"] or 0) + 1
        version = SubsetVersion.objects.create(
            subset=subset, number=number, content_hash=content_hash, snapshot=snapshot, frozen_by=frozen_by
        )
        ids = dict(
            Conversation.objects.filter(prompt_id__in=[m["prompt_id"] for m in snapshot]).values_list("prompt_id", "id")
        )
        version.conversations.add(*ids.values())
    return version, True


def export_version_lines(version: SubsetVersion) -> Iterator[str]:
    """The version in the HealthBench file format, with the rubrics it was frozen with."""
    members = version.snapshot
    for start in range(0, len(members), BATCH):
        chunk = members[start : start + BATCH]
        conversations = {
            c.prompt_id: c for c in Conversation.objects.filter(prompt_id__in=[m["prompt_id"] for m in chunk])
        }
        ideals = {
            i.conversation_id: IdealData(i.text, i.group, tuple(i.reference_responses))
            for i in IdealResponse.objects.filter(conversation__in=conversations.values(), from_dataset=True)
        }
        for member in chunk:
            conversation = conversations[member["prompt_id"]]
            yield format_conversation_row(
                conversation,
                [RubricItem(r["criterion"], r["points"], tuple(r["tags"])) for r in member["rubrics"]],
                ideals.get(conversation.id),
            )


def version_content_hash(version: SubsetVersion) -> str:
    """Recompute the hash from what the version exports now (it must equal the stored one)."""
    digest = hashlib.sha256()
    for line in export_version_lines(version):
        digest.update(line.encode() + b"\n")
    return digest.hexdigest()
