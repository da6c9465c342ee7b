"""Conversations, rubrics, responses and an imported run whose grades follow the rule of the
test LLM server (tests/llm_server.py): a criterion "need:WORD" is met when the response
says WORD. A grader run against that server agrees with the imported run, so re-grading it
must reproduce its report exactly.
"""

import random

from annotation.models import Conversation, Criterion, Subset, SubsetMember
from grading.models import Grade, Response, Run

WORDS = ["kiwi", "mango", "papaya", "guava", "lychee", "quince", "feijoa", "durian", "longan", "rambutan"]
AXES = ["completeness", "accuracy", "context_awareness", "communication_quality", "instruction_following"]
POINTS = [7, 5, 3, 2, -2, -5, 8, 4, -1, 6]


def conversation_with_rubric(
    index: int, *, n_criteria: int, faults: dict[int, str] | None = None, entries: dict[int, str] | None = None
) -> Conversation:
    """A conversation whose criterion j needs WORDS[j]; `faults` adds ``fault:KIND:N`` markers
    and `entries` ``entry:KIND`` ones (a spoilt entry in a per-response answer)."""
    conversation = Conversation.objects.create(
        prompt_id=f"conv-{index}",
        messages=[
            {"role": "user", "content": f"I have had a mild fever for {index + 1} days. What should I do?"},
            {"role": "assistant", "content": "How high is it, and do you have other symptoms?"},
            {"role": "user", "content": "About 38 C, a sore throat. say: " + " ".join(WORDS[: 1 + index % 4])},
        ],
        example_tags=[f"theme:{['hedging', 'communication', 'global_health'][index % 3]}"],
        theme=["hedging", "communication", "global_health"][index % 3],
    )
    for j in range(n_criteria):
        marker = f" fault:{(faults or {})[j]}" if j in (faults or {}) else ""
        marker += f" entry:{(entries or {})[j]}" if j in (entries or {}) else ""
        Criterion.objects.create(
            conversation=conversation,
            position=j,
            text=f"Mentions need:{WORDS[j]} somewhere in the reply.{marker}",
            points=POINTS[(index + j) % len(POINTS)],
            tags=["level:example", f"axis:{AXES[j % len(AXES)]}"],
            axis=AXES[j % len(AXES)],
        )
    return conversation


def response_text(rng: random.Random) -> str:
    return "Rest and drink fluids. " + " ".join(word for word in WORDS if rng.random() < 0.5) + "."


def imported_run(
    *,
    name: str = "imported",
    conversations: int = 4,
    samples: int = 2,
    n_criteria: int = 5,
    faults: dict[int, str] | None = None,
    faulty_conversations: int | None = None,
    entries: dict[int, str] | None = None,
    seed: int = 0,
) -> Run:
    """A run as import_run leaves one: responses and grades that agree with the server's rule.

    `faults` go into the criteria of every conversation, or of the first `faulty_conversations`."""
    rng = random.Random(seed)
    run = Run.objects.create(plan=Run.Plan.STORED, name=name, status=Run.Status.IMPORTED, samples=samples)
    grades = []
    for index in range(conversations):
        faulty = faulty_conversations is None or index < faulty_conversations
        conversation = conversation_with_rubric(
            index, n_criteria=n_criteria, faults=faults if faulty else None, entries=entries if faulty else None
        )
        criteria = list(conversation.criteria.order_by("position"))
        for k in range(samples):
            response = Response.objects.create(conversation=conversation, text=response_text(rng), sample_index=k)
            said = set(response.text.rstrip(".").split())
            for criterion in criteria:
                word = criterion.text.split("need:")[1].split()[0]
                grades.append(
                    Grade(
                        run=run,
                        response=response,
                        criterion=criterion,
                        position=criterion.position,
                        criterion_text=criterion.text,
                        points=criterion.points,
                        tags=criterion.tags,
                        met=word in said,
                    )
                )
    Grade.objects.bulk_create(grades)
    return run


def subset_of(name: str, conversations, kind: str = Subset.Kind.CUSTOM) -> Subset:
    subset = Subset.objects.create(name=name, kind=kind)
    SubsetMember.objects.bulk_create([SubsetMember(subset=subset, conversation=c) for c in conversations])
    return subset
