from django.urls import path

from annotation.views import conversations as views
from annotation.views import curation as views_curation
from annotation.views import curator as views_curator
from annotation.views import drafts as views_drafts
from annotation.views import gold as views_gold
from annotation.views import guidelines as views_guidelines
from annotation.views import ideal as views_ideal
from annotation.views import labels as views_labels
from annotation.views import rubric as views_rubric
from annotation.views import text_drafts as views_text_drafts
from annotation.views import votes as views_votes

urlpatterns = [
    path("conversations/", views.conversation_list, name="conversation_list"),
    path("conversations/new/", views_drafts.draft, name="draft"),
    path("conversations/<uuid:code>/", views.conversation_detail, name="conversation_detail"),
    path("conversations/<uuid:code>/consensus/", views_curation.consensus_tally, name="consensus_tally"),
    # A physician's task pages: the conversation's code, resolved through their own assignment.
    path("conversations/<uuid:code>/rubric/", views_rubric.rubric_editor, name="rubric_editor"),
    path("conversations/<uuid:code>/rubric/criteria/", views_rubric.criterion_add, name="criterion_add"),
    path(
        "conversations/<uuid:code>/rubric/criteria/<int:criterion_id>/",
        views_rubric.criterion_row,
        name="criterion_row",
    ),
    path(
        "conversations/<uuid:code>/rubric/criteria/<int:criterion_id>/edit/",
        views_rubric.criterion_edit,
        name="criterion_edit",
    ),
    path(
        "conversations/<uuid:code>/rubric/criteria/<int:criterion_id>/delete/",
        views_rubric.criterion_remove,
        name="criterion_delete",
    ),
    path("conversations/<uuid:code>/rubric/submit/", views_rubric.rubric_submit_view, name="rubric_submit"),
    path("conversations/<uuid:code>/ideal/", views_ideal.ideal_editor, name="ideal_editor"),
    path("conversations/<uuid:code>/votes/", views_votes.votes, name="votes"),
    path("conversations/<uuid:code>/votes/<uuid:consensus_code>/", views_votes.vote, name="vote"),
    path("drafts/", views_text_drafts.draft_save_view, name="draft_save"),
    path("guidelines/", views_guidelines.guidelines, name="guidelines"),
    path("guidelines/<slug:kind>/edit/", views_guidelines.guideline_edit, name="guideline_edit"),
    path("guidelines/<slug:kind>/read/", views_guidelines.guideline_read, name="guideline_read"),
    path("labels/", views_labels.label_next, name="label_next"),
    path("labels/<uuid:code>/", views_labels.label_item, name="label_item"),
    # Curators write here; researchers may read.
    path("curator/assignments/", views_curation.assignments, name="assignments"),
    path("curator/physicians/", views_curation.physicians, name="physicians"),
    path("curator/gold/", views_gold.gold_items, name="gold_items"),
    path("curator/gold/<int:gold_id>/edit/", views_gold.gold_item_edit, name="gold_item_edit"),
    path("curator/gold/<int:gold_id>/remove/", views_gold.gold_item_remove_view, name="gold_item_remove"),
    path("curator/physicians/link/", views_curation.physician_link, name="physician_link"),
    path("curator/physicians/<uuid:code>/status/", views_curation.physician_status, name="physician_status"),
    # Curators' data pages: import, subsets, consensus overview, statistics.
    path("curator/import/", views_curator.curator_import, name="curator_import"),
    path("curator/subsets/", views_curator.curator_subsets, name="curator_subsets"),
    path("curator/subsets/<slug:name>/", views_curator.curator_subset, name="curator_subset"),
    path("curator/subsets/<slug:name>/filter/", views_curator.curator_subset_filter, name="curator_subset_filter"),
    path("curator/subsets/<slug:name>/pick/", views_curator.curator_subset_pick, name="curator_subset_pick"),
    path(
        "curator/subsets/<slug:name>/rebuild/",
        views_curator.curator_subset_rebuild_consensus,
        name="curator_subset_rebuild",
    ),
    path("curator/subsets/<slug:name>/hard/", views_curator.curator_subset_build_hard, name="curator_subset_hard"),
    path("curator/subsets/<slug:name>/undo/", views_curator.curator_subset_undo, name="curator_subset_undo"),
    path("curator/subsets/<slug:name>/freeze/", views_curator.curator_subset_freeze, name="curator_subset_freeze"),
    path("curator/subsets/<slug:name>/export/", views_curator.curator_subset_export, name="curator_subset_export"),
    path("curator/consensus/", views_curator.curator_consensus, name="curator_consensus"),
    path("stats/", views_curator.curator_stats, name="curator_stats"),
]
