"""Imported runs the grading benchmarks re-grade, built straight into the database."""


def stored_run(name: str, samples: int, criteria: list, responses: list, words: list[str]):
    """An imported run holding a grade for each response on each of its conversation's criteria:
    met when the response has the criterion's word (what the test server's grader also says)."""
    from grading.models import Grade, Run

    run = Run.objects.create(plan=Run.Plan.STORED, name=name, status=Run.Status.IMPORTED, samples=samples)
    by_conversation: dict[int, list] = {}
    for criterion in criteria:
        by_conversation.setdefault(criterion.conversation_id, []).append(criterion)
    Grade.objects.bulk_create(
        [
            Grade(
                run=run,
                response=r,
                criterion=c,
                position=c.position,
                criterion_text=c.text,
                points=c.points,
                tags=c.tags,
                met=words[c.position] in r.text.split(),
            )
            for r in responses
            for c in by_conversation[r.conversation_id]
        ],
        batch_size=5000,
    )
    return run
