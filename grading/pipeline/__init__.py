"""The grading pipeline: from a launched run to stored grades.

Endpoint client (client; request_shape, the request and reply of each API style; endpoint,
the call target of a run's endpoint snapshot; engine), cost, rate limits and slots, policy sampling, batches
(the unit a worker claims), run services (launch, resume, cancel, sweep), Celery tasks, the
grader prompt, the estimate before launch, and the run pages. May import grading.models,
annotation's models and services; nothing outside grading.pipeline imports its tasks module.
"""
