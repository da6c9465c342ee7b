"""Warnings for rubric writers: wording that disagrees with the sign of the points, and near duplicates.

Pure Python, no Django. These are hints shown beside the editor, never reasons to refuse a
criterion: a physician may have a good reason for an unusual wording.
"""

import difflib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

# Openings that describe something the response gets wrong or leaves out. Met means the
# failure happened, so such a criterion should take away points.
FAILURE_OPENINGS = (
    "fails to",
    "fail to",
    "failing to",
    "does not",
    "doesn't",
    "did not",
    "didn't",
    "do not",
    "don't",
    "omits",
    "neglects",
    "misses",
    "overlooks",
    "ignores",
    "lacks",
    "forgets",
    "avoids mentioning",
    "incorrectly",
    "wrongly",
    "falsely",
    "inaccurately",
    "never",
    "refuses to",
    "is unable to",
)
# Leading words that say nothing about the sign ("The response fails to ..." reads as "fails to ...").
SUBJECTS = re.compile(
    r"^(?:the\s+)?(?:model(?:'s)?\s+|assistant(?:'s)?\s+|ai\s+)?(?:response|reply|answer|completion)?\s*", re.I
)
WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")

# Most negative criteria of the public data open with the same verbs as positive ones
# ("Recommends ...", "Suggests ...", "States that ..."): what makes them negative is the
# advice itself. So the verb alone says nothing about the sign; what follows it does.
_ADVISES = r"(?:recommends|advises|suggests|tells|encourages|instructs|urges|directs|proposes|says|states)"
_WHOM = r"(?:\s+(?:the\s+)?(?:user|patient|parent|caregiver|person|them|him|her|they))?"
# Advice that keeps someone from care: waiting, delaying, skipping, pushing through.
HARMFUL_ADVICE = re.compile(
    rf"^{_ADVISES}{_WHOM}(?:\s+to)?\s+(?P<cue>"
    r"wait(?:ing)?(?:\s+(?:and|to)\s+see|\s+it\s+out|\s+for|\s+until|\s+before|\s+(?:a\s+few|several|some|a)\s+"
    r"(?:days|hours|weeks))"
    r"|delay(?:ing)?|postpon(?:e|ing)|ignor(?:e|ing)|skip(?:ping)?|forgo(?:ing)?|push(?:ing)?\s+through"
    r"|avoid(?:ing)?\s+(?:seeing|the\s+(?:doctor|hospital|emergency)|medical|emergency|care|treatment|going)"
    r"|not\s+(?:to\s+)?(?:seek|see|call|go)\w*)\b",
    re.I,
)
# Reassurance that plays a symptom down ("States that it's just heartburn").
MINIMISING = re.compile(
    rf"^{_ADVISES}\b[^.;(]*?\b(?P<cue>(?:is|are|it's)\s+(?:just|merely|simply)\s+(?!as\b)\w+"
    r"|nothing\s+to\s+worry\s+about|no\s+need\s+to\s+(?:see|seek|call|go|consult)\w*)",
    re.I,
)
# Advice to get urgent care: rewarded unless the criterion qualifies it.
URGENT_CARE = re.compile(
    rf"^{_ADVISES}{_WHOM}(?:\s+to)?\s+(?P<cue>"
    r"seek(?:ing)?\s+(?:emergency|immediate|urgent)\s+(?:medical\s+)?(?:help|care|attention|treatment|evaluation)"
    r"|call(?:ing)?\s+(?:emergency\s+services|911|999|112|an\s+ambulance)"
    r"|go(?:ing)?\s+to\s+(?:the\s+)?(?:nearest\s+)?(?:emergency|er\b))",
    re.I,
)
# Words by which a criterion says urgent care was the wrong call here ("for a minor cut",
# "before checking breathing", "unnecessarily"): then negative points are intended.
QUALIFIED = re.compile(
    r"\b(?:unnecessar\w*|without|mild|minor|only|over\w*|excessive\w*|alarm\w*|not|fails?|before|instead|rather"
    r"|even|just|although|but|despite|when|if|unless|for\s+(?:a|any|every|all))\b",
    re.I,
)
# Criteria that argue for their own points ("(Justification: ...)") were weighed on purpose.
JUSTIFIED = re.compile(r"\bjustification\b", re.I)

# Two criteria this alike are probably the same item written twice: most words shared
# (token Jaccard, a cheap first filter) and in much the same order (difflib's ratio).
DUPLICATE_JACCARD = 0.6
DUPLICATE_RATIO = 0.8


@dataclass(frozen=True)
class SignWarning:
    opening: str
    message: str


@dataclass(frozen=True)
class DuplicatePair:
    first: int
    second: int
    similarity: float
    # The words by which two alike criteria say different things ("harmless", "melanoma"): then
    # they are not the same item written twice, and nobody should be offered to merge them.
    contrast: tuple[str, str] | None = None


# Words that turn a statement round: present on one side of a difference only, the two say opposites.
NEGATIONS = frozenset({"not", "no", "never", "without", "against", "don't", "doesn't", "isn't", "aren't", "cannot"})
# A different word after one of these is a different claim about the same thing ("the mole is harmless"
# vs "the mole is melanoma"), not a rewording.
COPULAS = frozenset({"is", "are", "was", "were", "be", "being", "as", "seems", "looks", "likely", "probably"})


def _opening(text: str) -> str:
    stripped = text.strip().lower().lstrip("-•*([\"' ")
    return SUBJECTS.sub("", stripped, count=1).strip()


def sign_warning(text: str, points: int) -> SignWarning | None:
    """A warning when the wording and the sign of the points disagree, else None.

    Tuned on the public HealthBench rows, whose signs are taken as right: it flags few of
    them (the figure is in the README) and still catches harmful advice given positive points.
    """
    if JUSTIFIED.search(text):
        return None
    opening = _opening(text)
    if points > 0:
        for phrase in FAILURE_OPENINGS:
            if opening.startswith(phrase + " ") or opening == phrase:
                return SignWarning(
                    phrase,
                    f"Reads as a failure (\u201c{phrase} \u2026\u201d) but gives +{points} points: a response that "
                    "fails this way would be rewarded. Negative points, or a positive wording?",
                )
        found = HARMFUL_ADVICE.match(opening) or MINIMISING.match(opening)
        if found:
            cue = found["cue"]
            return SignWarning(
                cue,
                f"Reads as harmful advice (\u201c{cue} \u2026\u201d) but gives +{points} points: a response that "
                "gives this advice would be rewarded. Negative points, or a wording that says what a good "
                "response does?",
            )
    elif points < 0:
        found = URGENT_CARE.match(opening)
        if found and not QUALIFIED.search(opening[found.end() :]) and not QUALIFIED.search(opening[: found.start()]):
            cue = found["cue"]
            return SignWarning(
                cue,
                f"Reads as sound advice (\u201c{cue} \u2026\u201d) but gives {points} points: a response that "
                "gives it would be penalised. Positive points, or say when this advice is wrong?",
            )
    return None


def tokens(text: str) -> list[str]:
    return WORD.findall(text.lower())


def duplicate_score(a: Sequence[str], b: Sequence[str]) -> float | None:
    """How alike two token lists are (0..1) when they look like the same criterion, else None.

    Both the shared vocabulary (token Jaccard) and the word order (difflib's ratio) must be
    close: rubric items on one topic share many words without being duplicates. Items that
    differ in one key word ("ibuprofen" / "paracetamol") still match: it is a hint to look.
    """
    if not a or not b:
        return None
    if min(len(a), len(b)) < 3:
        # Very short criteria ("Is concise.") match by chance; only an exact repeat counts.
        return 1.0 if list(a) == list(b) else None
    set_a, set_b = set(a), set(b)
    if len(set_a & set_b) / len(set_a | set_b) < DUPLICATE_JACCARD:
        return None
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    # quick_ratio() bounds ratio() from above and costs far less: skip the full match when it cannot pass.
    if matcher.quick_ratio() < DUPLICATE_RATIO:
        return None
    ratio = matcher.ratio()
    return ratio if ratio >= DUPLICATE_RATIO else None


def contrast(a: Sequence[str], b: Sequence[str]) -> tuple[str, str] | None:
    """The differing words by which two alike token lists make different claims, or None for a rewording."""
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        left, right = set(a[i1:i2]), set(b[j1:j2])
        if (left & NEGATIONS) != (right & NEGATIONS):
            return " ".join(a[i1:i2]) or "—", " ".join(b[j1:j2]) or "—"
        if tag == "replace" and i1 > 0 and a[i1 - 1] in COPULAS:
            return " ".join(a[i1:i2]), " ".join(b[j1:j2])
    return None


def near_duplicates(items: Iterable[tuple[int, str]]) -> list[DuplicatePair]:
    """Pairs of (id, text) items whose texts are near duplicates, in input order."""
    prepared = [(key, tokens(text)) for key, text in items]
    pairs = []
    for i, (key_a, tokens_a) in enumerate(prepared):
        for key_b, tokens_b in prepared[i + 1 :]:
            score = duplicate_score(tokens_a, tokens_b)
            if score is not None:
                pairs.append(DuplicatePair(key_a, key_b, round(score, 2), contrast(tokens_a, tokens_b)))
    return pairs


def positive_total(points: Iterable[int]) -> int:
    """The denominator of the example score: the sum of the positive points."""
    return sum(p for p in points if p > 0)
