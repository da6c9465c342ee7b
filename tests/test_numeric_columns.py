"""grading/physicians/columns.py: numeric columns read in bulk give what the rows give."""

import numpy as np
import pytest
from django.db.models import BooleanField, ExpressionWrapper, Q

from annotation.models import Physician
from grading.physicians.columns import numeric_columns, raw_rows
from tests.workspace import physician

pytestmark = pytest.mark.django_db


def test_columns_hold_the_rows_values_in_order():
    made = [physician(f"p{i}", status=Physician.Status.REMOVED if i % 2 else Physician.Status.ACTIVE) for i in range(5)]
    query = Physician.objects.filter(id__in=[p.pk for p in made]).order_by("id").values_list("id", "user_id")
    ids, users = numeric_columns(query, ("bigint", "bigint"))
    assert ids.dtype == np.int64
    assert list(zip(ids.tolist(), users.tolist(), strict=True)) == raw_rows(query)
    unnamed = ExpressionWrapper(Q(anonymized_id__isnull=True), output_field=BooleanField())
    flags = numeric_columns(query.annotate(u=unnamed).values_list("id", "u"), ("bigint", "boolean"))[1]
    assert flags.dtype == bool
    assert flags.tolist() == [True] * 5
    none = numeric_columns(Physician.objects.none().values_list("id"), ("double precision",))[0]
    assert none.dtype == np.float64
    assert none.size == 0


def test_a_null_takes_the_row_by_row_path_and_unknown_types_are_refused():
    physician("with-account")
    Physician.objects.create(anonymized_id="external")
    query = Physician.objects.order_by("id").values_list("id", "user_id")
    with pytest.raises(TypeError):
        # A NULL cannot be an integer column: the bulk read notices it rather than misreading.
        numeric_columns(query, ("bigint", "bigint"))
    users = numeric_columns(query, ("bigint", "double precision"))[1]
    assert np.isnan(users[-1])
    assert users[0] > 0
    with pytest.raises(ValueError, match="no numeric column type"):
        numeric_columns(query, ("text",))
