# HealthBench Studio: one image for the web server and the Celery worker (see docker-compose.yml).
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    VAR_DIR=/var/lib/healthbench \
    STATIC_ROOT=/app/staticfiles

WORKDIR /app

# The runtime lock only, first, so that a code change does not reinstall it. The dev/test lock
# (requirements-dev.txt) stays out of the image. --require-hashes: every downloaded file must
# match a hash in the lock.
COPY requirements.txt .
RUN pip install --require-hashes -r requirements.txt

# What the web server and the worker run, and nothing else: no tests/, bench/, scripts/ or
# locks for development. A new top-level package needs its own line here.
COPY manage.py ./
COPY healthbench_web/ healthbench_web/
COPY annotation/ annotation/
COPY grading/ grading/
COPY templates/ templates/
COPY static/ static/

RUN useradd --system --home-dir /app --shell /usr/sbin/nologin healthbench \
    && mkdir -p "$VAR_DIR" "$STATIC_ROOT" \
    && chown healthbench "$VAR_DIR" "$STATIC_ROOT"
USER healthbench

EXPOSE 8000
CMD ["gunicorn", "healthbench_web.wsgi", "--bind", "0.0.0.0:8000", "--workers", "3", "--access-logfile", "-"]
