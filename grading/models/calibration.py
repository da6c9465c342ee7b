"""A run's calibration sample: n of its responses drawn at random for physicians to score, the
ground truth that turns the grader's score into the physician-calibrated one
(grading.calibration)."""

from django.db import models
from django.db.models import Q

from grading.models.runs import Response, Run


class CalibrationSample(models.Model):
    """The design of one run's sample, frozen once drawn: its size, seed and strata."""

    run = models.OneToOneField(Run, on_delete=models.CASCADE, related_name="calibration_sample")
    size = models.PositiveIntegerField()
    seed = models.BigIntegerField()
    # Stratified by theme: each theme gets its share of the sample (proportional allocation),
    # and the estimate weights each theme by its share of the run.
    by_theme = models.BooleanField(default=False)
    physicians_per_response = models.PositiveSmallIntegerField(default=1)
    created = models.DateTimeField(auto_now_add=True)
    created_by = models.CharField(max_length=150, blank=True)

    class Meta:
        constraints = [
            models.CheckConstraint(condition=Q(size__gte=2), name="calibration_sample_size"),
            models.CheckConstraint(
                condition=Q(physicians_per_response__in=(1, 2)), name="calibration_sample_physicians"
            ),
        ]

    def __str__(self) -> str:
        return f"calibration sample of {self.run} (n={self.size}, seed={self.seed})"


class CalibrationItem(models.Model):
    """One sampled response and the stratum it was drawn from ("" when not stratified)."""

    sample = models.ForeignKey(CalibrationSample, on_delete=models.CASCADE, related_name="items")
    response = models.ForeignKey(Response, on_delete=models.CASCADE, related_name="+")
    stratum = models.CharField(max_length=200, blank=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(fields=["sample", "response"], name="one_calibration_item_per_response"),
        ]

    def __str__(self) -> str:
        return f"{self.sample}: response {self.response_id}"
