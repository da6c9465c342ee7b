from pathlib import Path
from typing import Any, BinaryIO

from annotation.formats.validation import file_lines
from annotation.management.import_command import ImportCommand
from grading.metaeval.importer import META_EVAL_SUBSET, MetaEvalImportSummary, meta_eval_import


class Command(ImportCommand):
    help = (
        "Import a HealthBench meta-eval JSONL file (prompt, completion, rubric, category, binary_labels, "
        "anonymized_physician_ids, completion_id, prompt_id, canary): conversations are matched by prompt_id "
        f"(new ones join the subset '{META_EVAL_SUBSET}'), responses by completion_id, the category's consensus "
        "criterion is attached to the conversation, and each anonymized physician's label is stored. "
        "The whole file is imported in one transaction: on any error nothing is written and each bad line "
        "is listed with its field. Importing the same file again changes nothing."
    )
    file_help = "path to the meta-eval .jsonl file"

    def import_file(self, file: Path, handle: BinaryIO, options: dict[str, Any]) -> MetaEvalImportSummary:
        return meta_eval_import(lines=file_lines(handle))
