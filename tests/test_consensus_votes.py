"""Consensus voting: a physician's own ballot, and attachment once enough active physicians agree."""

import threading

import pytest
from django.db import connection, connections
from django.urls import reverse

from annotation.models import Assignment, ConsensusVote, Criterion, Physician
from annotation.services.consensus import vote_cast
from tests.workspace import client_for, consensus, conversation, htmx, make_world, physician, task

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(settings):
    settings.CONSENSUS_MIN_AGREE = 2
    return make_world()


def _vote(client, world, entry, applies: str, headers=None):
    return client.post(reverse("vote", args=[world.a.code, entry.code]), {"applies": applies}, **(headers or {}))


def _attached(world, entry):
    return Criterion.objects.filter(conversation=world.a, consensus_criterion=entry)


def test_the_ballot_lists_the_catalogue_entries_that_fit_the_theme(world):
    page = client_for(world.owner).get(reverse("votes", args=[world.a.code])).text
    for entry in world.catalogue:
        assert entry.text in page
    assert world.other_theme.cluster not in page
    assert "0</strong> of 3 voted" in page


def test_a_vote_is_recorded_and_the_row_comes_back_with_htmx(world):
    response = _vote(client_for(world.owner), world, world.catalogue[1], "yes", htmx())
    assert response.status_code == 200
    assert f'id="vote-{world.catalogue[1].code}" class="ballot-row applies"' in response.text
    assert (
        '<div id="vote-progress" hx-swap-oob="innerHTML" data-announce="1 of 3 voted."><p><strong>1</strong> of 3'
        in response.text
    )
    assert ConsensusVote.objects.get(physician=world.owner).applies is True


def test_voting_works_without_javascript(world):
    response = _vote(client_for(world.owner), world, world.catalogue[1], "no")
    assert response.status_code == 302
    assert response.url.endswith(f"#vote-{world.catalogue[1].code}")
    assert ConsensusVote.objects.get(physician=world.owner).applies is False


def test_a_vote_can_be_changed(world):
    client = client_for(world.owner)
    _vote(client, world, world.catalogue[1], "yes")
    _vote(client, world, world.catalogue[1], "no")
    assert ConsensusVote.objects.get(physician=world.owner).applies is False


def test_the_second_agreeing_physician_attaches_the_criterion_once(world):
    entry = world.catalogue[1]
    _vote(client_for(world.owner), world, entry, "yes")
    assert not _attached(world, entry).exists()
    _vote(client_for(world.colleague), world, entry, "yes")
    criterion = _attached(world, entry).get()
    assert criterion.level == Criterion.Level.CLUSTER
    assert criterion.origin == Criterion.Origin.VOTES
    assert criterion.tags == entry.tags()
    assert criterion.points == entry.points
    assert criterion.text == entry.text
    _vote(client_for(world.colleague), world, entry, "yes")
    assert _attached(world, entry).count() == 1


def test_disagreeing_votes_do_not_attach(world):
    entry = world.catalogue[1]
    _vote(client_for(world.owner), world, entry, "yes")
    _vote(client_for(world.colleague), world, entry, "no")
    assert not _attached(world, entry).exists()


def test_votes_of_physicians_on_trial_do_not_count(world):
    entry = world.catalogue[1]
    task(world.trial, Assignment.Kind.CONSENSUS_VOTE, world.a)
    _vote(client_for(world.owner), world, entry, "yes")
    _vote(client_for(world.trial), world, entry, "yes")
    assert not _attached(world, entry).exists()


def test_changing_a_vote_detaches_what_votes_attached(world):
    entry = world.catalogue[1]
    _vote(client_for(world.owner), world, entry, "yes")
    _vote(client_for(world.colleague), world, entry, "yes")
    _vote(client_for(world.colleague), world, entry, "no")
    assert not _attached(world, entry).exists()


def test_votes_never_detach_a_criterion_from_the_dataset(world):
    entry = world.catalogue[0]  # world.cluster: imported with the conversation
    _vote(client_for(world.owner), world, entry, "no")
    _vote(client_for(world.colleague), world, entry, "no")
    assert _attached(world, entry).get() == world.cluster


def test_the_ballot_never_shows_other_votes_or_attachment(world):
    entry = world.catalogue[1]
    _vote(client_for(world.owner), world, entry, "yes")
    _vote(client_for(world.colleague), world, entry, "yes")
    assert _attached(world, entry).exists()
    task(world.outsider, Assignment.Kind.CONSENSUS_VOTE, world.a)
    page = client_for(world.outsider).get(reverse("votes", args=[world.a.code])).text
    assert page.count('class="ballot-row"') == 3  # no row marked applies / not applies
    assert 'aria-pressed="true"' not in page
    assert "attached" not in page.lower()
    assert "tally" not in page.lower()
    assert "0</strong> of 3 voted" in page


def test_the_task_is_done_once_every_entry_has_a_vote(world):
    client = client_for(world.owner)
    for entry in world.catalogue:
        _vote(client, world, entry, "no")
    world.vote_task.refresh_from_db()
    assert world.vote_task.status == Assignment.Status.DONE


def test_an_entry_of_another_theme_cannot_be_voted(world):
    assert _vote(client_for(world.owner), world, world.other_theme, "yes").status_code == 404
    assert not ConsensusVote.objects.exists()


def test_a_forged_answer_is_refused(world):
    assert _vote(client_for(world.owner), world, world.catalogue[1], "maybe").status_code == 400
    assert not ConsensusVote.objects.exists()


def test_the_curator_tally_counts_only_active_physicians(world):
    entry = world.catalogue[1]
    task(world.trial, Assignment.Kind.CONSENSUS_VOTE, world.a)
    _vote(client_for(world.owner), world, entry, "yes")
    _vote(client_for(world.trial), world, entry, "yes")
    page = client_for(world.curator).get(reverse("consensus_tally", args=[world.a.code])).text
    row = page.split(entry.cluster)[1].split("</tr>")[0]
    assert '<td class="num">1</td><td class="num">0</td><td class="num">1</td>' in row
    assert "1 more needed" in row


def test_the_ballot_costs_the_same_queries_whatever_the_catalogue_size(world, django_assert_max_num_queries):
    client = client_for(world.owner)
    url = reverse("votes", args=[world.a.code])
    # Plus, the first time a text is shown, one query for its rendered Markdown and one to store it.
    # +1: the time-on-task event (annotation/services/time_on_task.py); +1: the physician's
    # answered gold items on this ballot (annotation/selectors/gold.py, ballot_feedback).
    with django_assert_max_num_queries(12):
        assert client.get(url).status_code == 200
    for n in range(20):
        consensus(f"more_{n}")
    # +1: the time-on-task event (annotation/services/time_on_task.py); +1: the physician's
    # answered gold items on this ballot (annotation/selectors/gold.py, ballot_feedback).
    with django_assert_max_num_queries(12):
        assert client.get(url).status_code == 200


def test_a_vote_costs_a_bounded_number_of_queries(world, django_assert_max_num_queries):
    _vote(client_for(world.owner), world, world.catalogue[2], "yes")
    colleague = client_for(world.colleague)
    # Includes the savepoints of update_or_create and get_or_create, the attachment itself, its
    # conversation's rubric version (annotation.rubric_versions) and the time-on-task event
    # (annotation/services/time_on_task.py); +2: is it a gold item (annotation/services/gold.py),
    # and the ballot's answered gold items.
    with django_assert_max_num_queries(32):
        assert _vote(colleague, world, world.catalogue[2], "yes", htmx()).status_code == 200


def _all_at_once(calls) -> list[BaseException]:
    """Run each call in its own thread, released together; each thread closes its connection."""
    barrier = threading.Barrier(len(calls))
    errors: list[BaseException] = []

    def run(call):
        try:
            barrier.wait(timeout=10)
            call()
        except BaseException as exc:  # reported by the test
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run, args=(call,)) for call in calls]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    return errors


@pytest.mark.django_db(transaction=True)
def test_many_votes_arriving_at_once_attach_the_criterion_exactly_once(settings):
    if connection.vendor != "postgresql":
        pytest.skip("needs PostgreSQL: SQLite serialises every write, so there is no race to test")
    settings.CONSENSUS_MIN_AGREE = 2
    conv = conversation("conv-race")
    entry = consensus("emergency_referrals_race")
    voters = [physician(f"voter{n}") for n in range(12)]
    errors = _all_at_once(
        [lambda p=p: vote_cast(physician=p, conversation=conv, consensus_criterion=entry, applies=True) for p in voters]
    )
    assert errors == []
    assert ConsensusVote.objects.filter(conversation=conv).count() == 12
    assert Criterion.objects.filter(conversation=conv, consensus_criterion=entry).count() == 1


@pytest.mark.django_db(transaction=True)
def test_two_deciding_votes_at_the_same_moment_never_lose_the_attachment(settings):
    # Without the row lock each transaction would count only its own vote and neither attach.
    if connection.vendor != "postgresql":
        pytest.skip("needs PostgreSQL: SQLite serialises every write, so there is no race to test")
    settings.CONSENSUS_MIN_AGREE = 2
    conv = conversation("conv-pair")
    first, second = physician("first"), physician("second")
    entries = [consensus(f"emergency_referrals_pair_{n}") for n in range(10)]
    for entry in entries:
        errors = _all_at_once(
            [
                lambda p=p, e=entry: vote_cast(physician=p, conversation=conv, consensus_criterion=e, applies=True)
                for p in (first, second)
            ]
        )
        assert errors == []
    assert Criterion.objects.filter(conversation=conv, consensus_criterion__in=entries).count() == 10
    assert Physician.objects.count() == 2


def test_the_tally_costs_the_same_queries_whatever_the_votes(world, django_assert_max_num_queries):
    curator = client_for(world.curator)
    url = reverse("consensus_tally", args=[world.a.code])
    # Session, user, profile, conversation, catalogue, counts, attachments, "can't judge" answers.
    with django_assert_max_num_queries(8):
        assert curator.get(url).status_code == 200
    for n in range(15):
        voter = physician(f"dr_voter_{n}")
        for entry in world.catalogue:
            vote_cast(physician=voter, conversation=world.a, consensus_criterion=entry, applies=n % 2 == 0)
    with django_assert_max_num_queries(8):
        page = curator.get(url).text
    assert '<td class="num">8</td><td class="num">7</td>' in page.split(world.catalogue[1].cluster)[1]
