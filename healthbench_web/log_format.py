"""Log formats: one line per record, readable text or (LOG_FORMAT=json) one JSON object.

Both carry the time in UTC (ISO 8601), the level, the logger and the message. Values passed
with ``extra={...}`` (a run's name, a batch number) become fields of the JSON object and
``key=value`` pairs after the text message, so an operator can search for every line of a run.
Each line is written without the values of the endpoint key variables (healthbench_web.redact),
whatever logged it: a provider that echoes a key in an error never puts it in a log.
"""

import json
import logging
from datetime import UTC, datetime

from healthbench_web.redact import endpoint_keys, redact

# Attributes every LogRecord has: anything else on a record came from `extra`.
_STANDARD = set(vars(logging.makeLogRecord({}))) | {"message", "asctime", "taskName"}


def _timestamp(record: logging.LogRecord) -> str:
    return datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _extra(record: logging.LogRecord) -> dict:
    return {key: value for key, value in vars(record).items() if key not in _STANDARD and not key.startswith("_")}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": _timestamp(record),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "process": record.process,
        }
        for key, value in _extra(record).items():
            entry.setdefault(key, value)
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        # default=str: an extra value that JSON cannot hold (a UUID, a datetime) is written as text
        # rather than losing the line.
        return redact(json.dumps(entry, ensure_ascii=False, default=str), endpoint_keys())


def _one_line(text: str) -> str:
    # A run's name is typed by a user: a newline in it must not start a forged log line.
    return text.replace("\r", "\\r").replace("\n", "\\n")


def _text_value(value: object) -> str:
    if isinstance(value, bool | int | float):
        return str(value)
    text = str(value)
    if text and not any(c.isspace() or c in '"=' for c in text):
        return text
    return json.dumps(text, ensure_ascii=False)


class TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line = f"{_timestamp(record)} {record.levelname:<7} {record.name}: {_one_line(record.getMessage())}"
        extra = _extra(record)
        if extra:
            line += " " + " ".join(f"{key}={_text_value(value)}" for key, value in extra.items())
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        if record.stack_info:
            line += "\n" + self.formatStack(record.stack_info)
        return redact(line, endpoint_keys())
