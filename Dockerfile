# HealthBench Studio: one image for the web server and the Celery worker (see docker-compose.yml).
# The build steps are scripts/build-image, which .ci/run also runs into a fresh directory and
# starts with this file's CMD (.ci/image_smoke.py), since CI has no Docker daemon.
# The base is pinned to a patch release and a Debian release; bump both on purpose.
FROM python:3.11.14-slim-bookworm AS build

ENV PYTHONDONTWRITEBYTECODE=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# The runtime lock only, first, so that a code change does not reinstall it. The dev/test lock
# (requirements-dev.txt) stays out of the image; every file pip downloads must match a hash.
COPY requirements.txt /src/
COPY scripts/build-image /src/scripts/
RUN /src/scripts/build-image deps /app

# The code, and its static files collected with their manifest (DEBUG=0 needs it).
COPY . /src/
RUN /src/scripts/build-image app /app

FROM python:3.11.14-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PATH=/app/venv/bin:$PATH \
    VAR_DIR=/var/lib/healthbench \
    STATIC_ROOT=/app/staticfiles

RUN useradd --system --home-dir /app --shell /usr/sbin/nologin healthbench \
    && mkdir -p "$VAR_DIR" \
    && chown healthbench "$VAR_DIR"
COPY --from=build /app /app
WORKDIR /app
USER healthbench

EXPOSE 8000
# The web server. Its settings (address, processes, timeout, access log) are gunicorn.conf.py,
# which gunicorn reads from /app; the workers' services in docker-compose.yml give their own command.
CMD ["gunicorn"]
