"""Importing meta-eval files (physician labels) and grader-label files: one transaction each.

A meta-eval row becomes: the conversation (matched by prompt_id, or created in subset
`meta-eval`), the response (matched by completion_id within the conversation), the consensus
criterion of its category (created from the row's rubric when the catalogue lacks it), that
criterion attached to the conversation, the anonymized physicians and their labels. Importing
the same file again finds everything and writes nothing.

A label-only row (no prompt, completion or rubric) takes its criterion from the consensus
catalogue and its conversation and response from what is stored. Where those are not stored
either, they are created without text (subset `meta-eval-labels-only`, never `meta-eval`, so
no run grades an empty conversation); a later file with the text fills it in. A physician
listed twice with the same label on one item is stored once (one label per physician and
item); the label keeps the count in `PhysicianLabel.repeats` so reports can say that the
reference would have counted every listing as a pair.
"""

import hashlib
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction
from django.db.models import Max
from django.db.models.functions import MD5

from annotation.formats.healthbench import RowError
from annotation.formats.importer import ImportFailed
from annotation.formats.validation import LineTooLong
from annotation.models import (
    THEMES,
    ConsensusCriterion,
    Conversation,
    Criterion,
    Physician,
    PhysicianLabel,
    Subset,
    SubsetMember,
)
from annotation.rubric_versions import rubric_changed
from annotation.services.quality_refresh import quality_changed
from grading.metaeval.files import MAX_ERRORS, FileInvalid, MetaEvalRow, parse_meta_eval_lines
from grading.models import Response
from healthbench_web.bulk import chunks, db_json, db_now, insert_rows, new_codes

META_EVAL_SUBSET = "meta-eval"
LABELS_ONLY_SUBSET = "meta-eval-labels-only"


def _capped(errors: list[RowError]) -> list[RowError]:
    if len(errors) <= MAX_ERRORS:
        return errors
    return [*errors[:MAX_ERRORS], RowError(errors[MAX_ERRORS].line, "", f"stopped after {MAX_ERRORS} errors")]


def _md5(text: str) -> str:
    # Compared with the database's MD5() so that re-imports need not read every stored text back.
    return hashlib.md5(text.encode(), usedforsecurity=False).hexdigest()


@dataclass
class MetaEvalImportSummary:
    rows: int = 0
    conversations_created: int = 0
    conversations_matched: int = 0
    responses_created: int = 0
    consensus_criteria_created: int = 0
    criteria_attached: int = 0
    physicians_created: int = 0
    labels_created: int = 0
    labels_present: int = 0
    label_only_rows: int = 0
    conversations_without_text: int = 0
    responses_without_text: int = 0
    texts_filled_in: int = 0
    labels_merged: int = 0  # repeated (physician, item) listings stored as one label
    warnings: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        return (
            f"{self.rows} rows: {self.conversations_created} new conversations ({self.conversations_matched} already "
            f"known), {self.responses_created} responses, {self.consensus_criteria_created} consensus criteria added "
            f"to the catalogue, {self.criteria_attached} criteria attached, {self.physicians_created} physicians, "
            f"{self.labels_created} physician labels added ({self.labels_present} already stored)"
            + (
                f"; {self.label_only_rows} label-only rows ({self.conversations_without_text} conversations and "
                f"{self.responses_without_text} responses stored without text)"
                if self.label_only_rows
                else ""
            )
            + (f"; {self.texts_filled_in} stored texts filled in" if self.texts_filled_in else "")
            + (
                f"; {self.labels_merged} repeated physician labels merged (the reference counts each as a pair)"
                if self.labels_merged
                else ""
            )
        )


def meta_eval_import(*, lines: Iterable[bytes | LineTooLong]) -> MetaEvalImportSummary:
    """Import a meta-eval JSONL file in one transaction; raise ImportFailed naming lines and fields."""
    try:
        parsed = parse_meta_eval_lines(lines)
    except FileInvalid as exc:
        raise ImportFailed(exc.errors) from None
    summary = MetaEvalImportSummary(rows=len(parsed.rows), warnings=list(parsed.warnings))
    summary.label_only_rows = sum(1 for r in parsed.rows if r.missing or r.rubric is None)
    summary.labels_merged = sum(len(r.repeated) for r in parsed.rows)
    with transaction.atomic():
        _store_meta_eval(parsed.rows, summary)
        quality_changed()  # the physician quality figures count external physicians' labels
    return summary


def _theme_of(cluster: str) -> str:
    # Cluster tags start with their theme (cluster:emergency_referrals_...); the longest match wins.
    name = cluster.removeprefix("cluster:")
    return max((t for t in THEMES if name.startswith(t + "_")), key=len, default="")


def _catalogue(
    rows: list[MetaEvalRow], summary: MetaEvalImportSummary, errors: list[RowError]
) -> dict[str, ConsensusCriterion]:
    first: dict[str, MetaEvalRow] = {}
    for row in rows:
        # A row with the rubric text is the one to check against, or to create from.
        if row.category not in first or (first[row.category].rubric is None and row.rubric is not None):
            first[row.category] = row
    found = {c.cluster: c for c in ConsensusCriterion.objects.filter(cluster__in=list(first))}
    for cluster, entry in found.items():
        if first[cluster].rubric is not None and entry.text != first[cluster].rubric:
            errors.append(
                RowError(
                    first[cluster].line, "rubric", f"differs from the catalogue's text for {cluster}; not imported"
                )
            )
    unknown = {c for c, row in first.items() if c not in found and row.rubric is None}
    for row in rows:
        if row.category in unknown:
            errors.append(
                RowError(
                    row.line,
                    "rubric",
                    f"is missing and the consensus catalogue has no {row.category}: give the rubric text, or "
                    "import a HealthBench or meta-eval file that holds this criterion first",
                )
            )
    missing = [c for c in first if c not in found and c not in unknown]
    if not missing:
        return found
    # A meta-eval row names no axis. Take it from a stored rubric item with that cluster tag if
    # one exists; otherwise leave it blank for a curator (or a later HealthBench import) to set.
    axes: dict[str, str] = {}
    for tags, axis in Criterion.objects.filter(
        level=Criterion.Level.CLUSTER, consensus_criterion__isnull=True
    ).values_list("tags", "axis"):
        for tag in tags:
            if tag in first and axis:
                axes.setdefault(tag, axis)
    ConsensusCriterion.objects.bulk_create(
        ConsensusCriterion(cluster=c, text=first[c].rubric or "", points=5, axis=axes.get(c, ""), theme=_theme_of(c))
        for c in missing
    )
    summary.consensus_criteria_created = len(missing)
    blank = [c for c in missing if c not in axes]
    if blank:
        summary.warnings.append(
            f"{len(blank)} consensus criteria were added without an axis (e.g. {blank[0]}): set it in the admin, "
            "or import the HealthBench file that holds them before the meta-eval file"
        )
    return {c.cluster: c for c in ConsensusCriterion.objects.filter(cluster__in=list(first))}


def _first_with(rows: list[MetaEvalRow], key, text) -> dict:
    """The first row of each key, preferring one that carries the text."""
    first: dict = {}
    for row in rows:
        k = key(row)
        if k not in first or (text(first[k]) is None and text(row) is not None):
            first[k] = row
    return first


def _conversations(rows: list[MetaEvalRow], errors: list[RowError], summary: MetaEvalImportSummary) -> dict[str, int]:
    first = _first_with(rows, lambda r: r.prompt_id, lambda r: r.messages)
    ids: dict[str, int] = {}
    for chunk in chunks(list(first)):
        for prompt_id, pk, messages in Conversation.objects.filter(prompt_id__in=chunk).values_list(
            "prompt_id", "id", "messages"
        ):
            ids[prompt_id] = pk
            incoming = first[prompt_id].messages
            if incoming is None:
                continue  # a label-only row: the stored conversation stands
            if messages == []:
                # Stored from a label-only row: this file brings its text.
                Conversation.objects.filter(pk=pk).update(messages=incoming)
                summary.texts_filled_in += 1
            elif messages != incoming:
                errors.append(
                    RowError(
                        first[prompt_id].line,
                        "prompt",
                        f"prompt_id {prompt_id!r} is already stored with other messages",
                    )
                )
    return ids


def _store_meta_eval(rows: list[MetaEvalRow], summary: MetaEvalImportSummary) -> None:
    errors: list[RowError] = []
    catalogue = _catalogue(rows, summary, errors)
    conversation_ids = _conversations(rows, errors, summary)
    summary.conversations_matched = len(conversation_ids)
    if errors:
        raise ImportFailed(_capped(errors))
    now = db_now()

    first_row = _first_with(
        [r for r in rows if r.prompt_id not in conversation_ids], lambda r: r.prompt_id, lambda r: r.messages
    )
    # New conversations get ids in file order, as the HealthBench import gives them.
    new_rows = list(first_row.values())
    codes = iter(new_codes(len(new_rows)))
    new_ids = insert_rows(
        Conversation,
        Conversation.INSERT_COLUMNS,
        [(next(codes), r.prompt_id, db_json(r.messages or []), "[]", "", r.canary, None, now) for r in new_rows],
    )
    conversation_ids.update(zip((r.prompt_id for r in new_rows), new_ids, strict=True))
    summary.conversations_created = len(new_rows)
    textless = {r.prompt_id for r in new_rows if r.messages is None}
    summary.conversations_without_text = len(textless)
    _join_subset(
        META_EVAL_SUBSET,
        list(dict.fromkeys(conversation_ids[r.prompt_id] for r in rows if r.prompt_id not in textless)),
        now,
    )
    if textless:
        _join_subset(
            LABELS_ONLY_SUBSET,
            list(dict.fromkeys(conversation_ids[r.prompt_id] for r in rows if r.prompt_id in textless)),
            now,
        )

    criterion_ids = _attach(rows, conversation_ids, catalogue, summary, now)
    response_ids = _responses(rows, conversation_ids, summary, errors, now)
    physician_ids = _physicians(rows, summary, now)
    if errors:
        raise ImportFailed(_capped(errors))
    _labels(rows, conversation_ids, catalogue, criterion_ids, response_ids, physician_ids, summary, errors, now)
    if errors:
        raise ImportFailed(_capped(errors))


def _join_subset(name: str, conversation_ids: list[int], now: Any) -> None:
    subset, _ = Subset.objects.get_or_create(name=name, defaults={"kind": Subset.Kind.CUSTOM})
    present: set[int] = set()
    for chunk in chunks(conversation_ids):
        present.update(
            SubsetMember.objects.filter(subset=subset, conversation_id__in=chunk).values_list(
                "conversation_id", flat=True
            )
        )
    insert_rows(
        SubsetMember,
        SubsetMember.INSERT_COLUMNS,
        [(subset.id, c, now) for c in conversation_ids if c not in present],
    )


def _attach(
    rows: list[MetaEvalRow],
    conversation_ids: dict[str, int],
    catalogue: dict[str, ConsensusCriterion],
    summary: MetaEvalImportSummary,
    now: Any,
) -> dict[tuple[int, int], int]:
    """(conversation id, consensus criterion id) -> id of the attached level:cluster criterion."""
    wanted = list(dict.fromkeys((conversation_ids[r.prompt_id], catalogue[r.category].id) for r in rows))
    cids = list(dict.fromkeys(c for c, _ in wanted))
    attached: dict[tuple[int, int], int] = {}
    last: dict[int, int] = {}
    for chunk in chunks(cids):
        stored = Criterion.objects.filter(conversation_id__in=chunk, consensus_criterion__isnull=False)
        for cid, ccid, pk in stored.values_list("conversation_id", "consensus_criterion_id", "id"):
            attached[(cid, ccid)] = pk
        tails = (
            Criterion.objects.filter(conversation_id__in=chunk).values("conversation_id").annotate(last=Max("position"))
        )
        last.update((t["conversation_id"], t["last"]) for t in tails)
    by_id = {c.id: c for c in catalogue.values()}
    new = [key for key in wanted if key not in attached]
    new_rows = []
    for cid, ccid in new:
        # A new criterion goes after the conversation's rubric, so stored positions never move.
        last[cid] = last.get(cid, -1) + 1
        entry = by_id[ccid]
        row = (
            cid,
            last[cid],
            entry.text,
            entry.points,
            db_json(entry.tags()),
            Criterion.Level.CLUSTER,
            entry.axis,
            ccid,
            None,
            False,
            now,
            now,
        )
        new_rows.append(row)
    attached.update(zip(new, insert_rows(Criterion, Criterion.INSERT_COLUMNS, new_rows), strict=True))
    rubric_changed(cid for cid, _ in new)
    summary.criteria_attached = len(new)
    return attached


def _responses(
    rows: list[MetaEvalRow],
    conversation_ids: dict[str, int],
    summary: MetaEvalImportSummary,
    errors: list[RowError],
    now: Any,
) -> dict[tuple[int, str], int]:
    """(conversation id, completion_id) -> response id; a stored response must hold the same text."""
    first: dict[tuple[int, str], MetaEvalRow] = _first_with(
        rows, lambda r: (conversation_ids[r.prompt_id], r.completion_id), lambda r: r.completion
    )
    found: dict[tuple[int, str], int] = {}
    for chunk in chunks(list(dict.fromkeys(k[1] for k in first))):
        stored = Response.objects.filter(completion_id__in=chunk).order_by("id")
        for cid, completion_id, pk, digest in stored.values_list("conversation_id", "completion_id", "id", MD5("text")):
            key = (cid, completion_id)
            if key not in first or key in found:
                continue
            found[key] = pk
            incoming = first[key].completion
            if incoming is None:
                continue  # a label-only row: the stored response stands
            if digest == _md5(""):
                if incoming:
                    # Stored from a label-only row: this file brings its text.
                    Response.objects.filter(pk=pk).update(text=incoming)
                    summary.texts_filled_in += 1
            elif digest != _md5(incoming):
                errors.append(
                    RowError(
                        first[key].line,
                        "completion",
                        f"completion_id {completion_id!r} is already stored with another text",
                    )
                )
    new = [key for key in first if key not in found]
    codes = iter(new_codes(len(new)))
    ids = insert_rows(
        Response,
        Response.INSERT_COLUMNS,
        [
            (
                next(codes),
                cid,
                first[(cid, c)].completion or "",
                Response.Source.IMPORTED,
                "",
                "{}",
                0,
                c,
                None,
                None,
                None,
                now,
            )
            for cid, c in new
        ],
    )
    found.update(zip(new, ids, strict=True))
    summary.responses_created = len(new)
    summary.responses_without_text = sum(1 for key in new if first[key].completion is None)
    return found


def _physicians(rows: list[MetaEvalRow], summary: MetaEvalImportSummary, now: Any) -> dict[str, int]:
    wanted = list(dict.fromkeys(pid for r in rows for pid, _ in r.labels))
    found: dict[str, int] = {}
    for chunk in chunks(wanted):
        for anonymized_id, pk in Physician.objects.filter(anonymized_id__in=chunk).values_list("anonymized_id", "id"):
            if anonymized_id is not None:
                found[anonymized_id] = pk
    new = [pid for pid in wanted if pid not in found]
    codes = iter(new_codes(len(new)))
    ids = insert_rows(
        Physician,
        Physician.INSERT_COLUMNS,
        [
            (next(codes), None, pid, Physician.Role.PHYSICIAN, Physician.Status.ACTIVE, "", "", "[]", "", now)
            for pid in new
        ],
    )
    found.update(zip(new, ids, strict=True))
    summary.physicians_created = len(new)
    return found


def _labels(
    rows: list[MetaEvalRow],
    conversation_ids: dict[str, int],
    catalogue: dict[str, ConsensusCriterion],
    criterion_ids: dict[tuple[int, int], int],
    response_ids: dict[tuple[int, str], int],
    physician_ids: dict[str, int],
    summary: MetaEvalImportSummary,
    errors: list[RowError],
    now: Any,
) -> None:
    response_list = list(dict.fromkeys(response_ids.values()))
    stored: dict[tuple[int, int, int], bool] = {}
    for chunk in chunks(response_list):
        labels = PhysicianLabel.objects.filter(response_id__in=chunk)
        for pid, rid, crid, met in labels.values_list("physician_id", "response_id", "criterion_id", "met"):
            stored[(pid, rid, crid)] = met
    new = []
    for r in rows:
        conversation = conversation_ids[r.prompt_id]
        rid = response_ids[(conversation, r.completion_id)]
        crid = criterion_ids[(conversation, catalogue[r.category].id)]
        repeats = Counter(r.repeated)
        for i, (anonymized_id, met) in enumerate(r.labels):
            key = (physician_ids[anonymized_id], rid, crid)
            if key not in stored:
                new.append((*key, met, "", repeats[anonymized_id], now))
                continue
            summary.labels_present += 1
            if stored[key] != met:
                errors.append(
                    RowError(
                        r.line,
                        f"binary_labels[{i}]",
                        f"physician {anonymized_id[:12]}… is stored as {'met' if stored[key] else 'not met'} "
                        "on this item; a label is never overwritten by an import",
                    )
                )
    if not errors:
        insert_rows(PhysicianLabel, PhysicianLabel.INSERT_COLUMNS, new)
        summary.labels_created = len(new)
