from django.urls import path

from annotation import views_curator as views

urlpatterns = [
    path("curator/import/", views.curator_import, name="curator_import"),
    path("curator/subsets/", views.curator_subsets, name="curator_subsets"),
    path("curator/subsets/<slug:name>/", views.curator_subset, name="curator_subset"),
    path("curator/subsets/<slug:name>/filter/", views.curator_subset_filter, name="curator_subset_filter"),
    path("curator/subsets/<slug:name>/pick/", views.curator_subset_pick, name="curator_subset_pick"),
    path("curator/subsets/<slug:name>/rebuild/", views.curator_subset_rebuild_consensus, name="curator_subset_rebuild"),
    path("curator/subsets/<slug:name>/hard/", views.curator_subset_build_hard, name="curator_subset_hard"),
    path("curator/subsets/<slug:name>/freeze/", views.curator_subset_freeze, name="curator_subset_freeze"),
    path("curator/subsets/<slug:name>/export/", views.curator_subset_export, name="curator_subset_export"),
    path("curator/consensus/", views.curator_consensus, name="curator_consensus"),
    path("stats/", views.curator_stats, name="curator_stats"),
]
