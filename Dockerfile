# HealthBench Studio: one image for the web server and the Celery worker (see docker-compose.yml).
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    VAR_DIR=/var/lib/healthbench \
    STATIC_ROOT=/app/staticfiles

WORKDIR /app

# Requirements first, so that a code change does not reinstall them.
COPY requirements.txt .
RUN pip install -r requirements.txt

COPY . .

RUN useradd --system --home-dir /app --shell /usr/sbin/nologin healthbench \
    && mkdir -p "$VAR_DIR" "$STATIC_ROOT" \
    && chown healthbench "$VAR_DIR" "$STATIC_ROOT"
USER healthbench

EXPOSE 8000
CMD ["gunicorn", "healthbench_web.wsgi", "--bind", "0.0.0.0:8000", "--workers", "3", "--access-logfile", "-"]
