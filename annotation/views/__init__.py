"""Pages of the annotation app, one module per area: conversations, physicians' task editors
(rubric, ideal, votes, labels, drafts), curation (assignments, vetting) and the curator's
data pages (import, subsets, consensus, statistics). Views call services and selectors.
"""
