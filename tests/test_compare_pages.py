import pytest
from django.core.management import call_command
from django.urls import reverse

from annotation.models import Conversation, Physician
from grading.models import Grade, Response, Run
from tests.healthbench_rows import consensus_row, row, write
from tests.people import person

pytestmark = pytest.mark.django_db


@pytest.fixture
def runs(tmp_path):
    path = tmp_path / "main.jsonl"
    write(path, row("p-1"), consensus_row("p-2"))
    call_command("import_healthbench", path)
    made = {}
    for name, met_first, text in [("a", False, "x" * 100), ("b", True, "y" * 104)]:
        run = Run.objects.create(plan=Run.Plan.STORED, name=name, status=Run.Status.IMPORTED)
        for conversation in Conversation.objects.all():
            response = Response.objects.create(conversation=conversation, text=text)
            for criterion in conversation.criteria.order_by("position"):
                met = met_first if criterion.position == 0 else criterion.points < 0 and False
                Grade.objects.create(
                    run=run,
                    response=response,
                    criterion=criterion,
                    position=criterion.position,
                    criterion_text=criterion.text,
                    points=criterion.points,
                    tags=criterion.tags,
                    met=met,
                )
        made[name] = run
    return made


def _url(runs, **extra):
    return reverse("compare_runs") + f"?a={runs['a'].code}&b={runs['b'].code}"


def test_a_researcher_compares_two_runs(client, runs):
    client.force_login(person("res", Physician.Role.RESEARCHER))
    response = client.get(_url(runs))
    assert response.status_code == 200
    comparison = response.context["comparison"]
    # B meets each conversation's first criterion (6 of 14 and 9 of 19 positive points), A nothing.
    assert comparison["overall"]["difference"] == pytest.approx((6 / 14 + 9 / 19) / 2)
    assert set(comparison["themes"]) == {"theme:hedging", "theme:emergency_referrals"}
    assert "axis:completeness" in comparison["axes"]
    win = comparison["length_controlled_win_rate"]
    assert (win["wins"], win["pairs_counted"], win["win_rate"]) == (2, 2, 1.0)
    page = response.content.decode()
    assert "Length-controlled win rate" in page
    assert "By axis" in page


def test_the_comparison_downloads_as_json(client, runs):
    client.force_login(person("res", Physician.Role.RESEARCHER))
    data = client.get(reverse("compare_runs_json") + f"?a={runs['a'].code}&b={runs['b'].code}").json()
    assert data["a"] == "a"
    assert data["b"] == "b"
    assert data["shared_conversations"] == 2


def test_physicians_cannot_compare_runs(client, runs):
    client.force_login(person("doc", Physician.Role.PHYSICIAN))
    assert client.get(_url(runs)).status_code == 403


def test_an_unknown_run_is_not_found(client, runs):
    client.force_login(person("res", Physician.Role.RESEARCHER))
    url = reverse("compare_runs") + f"?a={runs['a'].code}&b=00000000-0000-0000-0000-000000000000"
    assert client.get(url).status_code == 404
    assert client.get(reverse("compare_runs") + "?a=not-a-code&b=x").status_code == 404


def test_the_page_without_a_choice_offers_the_runs(client, runs):
    client.force_login(person("cur", Physician.Role.CURATOR))
    page = client.get(reverse("compare_runs")).content.decode()
    assert "<option" in page
    assert "Compare" in page


def test_a_run_compared_with_itself_differs_by_zero_with_a_zero_width_interval(client, runs):
    client.force_login(person("res", Physician.Role.RESEARCHER))
    url = reverse("compare_runs") + f"?a={runs['b'].code}&b={runs['b'].code}"
    response = client.get(url)
    overall = response.context["comparison"]["overall"]
    assert (overall["difference"], overall["low"], overall["high"]) == (0.0, 0.0, 0.0)
    assert "(95% interval 0.000 to 0.000, within resampling noise)" in response.content.decode()


def test_the_page_says_how_many_prompts_are_shared_and_left_out(client, runs):
    # Run b loses its response to p-2: only p-1 is shared, and a's p-2 response is left out.
    Response.objects.filter(grades__run=runs["b"], conversation__prompt_id="p-2").delete()
    client.force_login(person("res", Physician.Role.RESEARCHER))
    response = client.get(_url(runs))
    prompts = response.context["comparison"]["prompts"]
    assert (prompts["shared"], prompts["only_a"], prompts["only_b"], prompts["responses_left_out_a"]) == (1, 1, 0, 1)
    assert response.context["comparison"]["overall"]["n_prompts"] == 1
    page = response.content.decode()
    assert "Paired over the <b>1</b> prompts" in page
    assert "1 prompt only in a (1 response)" in page
