"""Settings for HealthBench Studio, read from the environment.

Runs as-is after checkout: SQLite under var/, a filesystem Celery broker under var/, a
generated development SECRET_KEY. Set DATABASE_URL and REDIS_URL (or CELERY_BROKER_URL) to
run on PostgreSQL and Redis; set DEBUG=0 plus SECRET_KEY and ALLOWED_HOSTS for production.
"""

import os
import secrets
from datetime import timedelta
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured
from kombu import Exchange, Queue

from healthbench_web.env import (
    endpoint_key_variables,
    env_bool,
    env_choice,
    env_float,
    env_int,
    env_list,
    env_rate,
    env_str,
    env_url,
)

BASE_DIR = Path(__file__).resolve().parent.parent
# The project's templates, static files and translations live inside this package (package data),
# so that an installed copy carries them beside its code and installs no top-level folders.
PACKAGE_DIR = Path(__file__).resolve().parent
# A checkout (or `pip install -e .`) keeps its state beside the code; an installed copy
# (`pip install .`, whose code sits in site-packages) in the user's data directory.
_USER_DATA = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share") / "healthbench-studio"
VAR_DIR = Path(env_str("VAR_DIR", str(BASE_DIR / "var" if (BASE_DIR / "manage.py").exists() else _USER_DATA)))
VAR_DIR.mkdir(parents=True, exist_ok=True)

DEBUG = env_bool("DEBUG", True)


def _secret_key() -> str:
    key = env_str("SECRET_KEY", "")
    if key:
        return key
    if not DEBUG:
        raise ImproperlyConfigured("SECRET_KEY must be set when DEBUG is off")
    # Development only: keep one generated key per checkout so sessions survive restarts.
    path = VAR_DIR / "dev-secret-key"
    if not path.exists():
        path.write_text(secrets.token_urlsafe(50))
    return path.read_text().strip()


SECRET_KEY = _secret_key()
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]", "testserver"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])
# An expired form says so on a page of the site instead of Django's bare 403.
CSRF_FAILURE_VIEW = "healthbench_web.errors.csrf_failure"

# How many physicians must vote that a consensus criterion applies before it is attached.
CONSENSUS_MIN_AGREE = env_int("CONSENSUS_MIN_AGREE", 2, minimum=1, maximum=100)
# How many unsubmitted drafts (annotation.Draft) one physician may keep: a field's draft goes
# when its text is submitted, so a working physician holds a handful.
DRAFTS_PER_PHYSICIAN = env_int("DRAFTS_PER_PHYSICIAN", 200, minimum=1, maximum=100_000)
# Physician quality (grading/physicians): a gap between two events of one task longer than
# this is idle time, cut out of the task's active time.
TIME_ON_TASK_IDLE_SECONDS = env_int("TIME_ON_TASK_IDLE_SECONDS", 300, minimum=10, maximum=86_400)
# Bootstrap resamples behind each physician's agreement interval.
PHYSICIAN_QUALITY_RESAMPLES = env_int("PHYSICIAN_QUALITY_RESAMPLES", 1000, minimum=100, maximum=20_000)
# The figures are computed by a worker after a change (annotation/services/quality_refresh.py):
# at most one refresh per this many seconds, counting every change made meanwhile ...
PHYSICIAN_QUALITY_REFRESH_SECONDS = env_int("PHYSICIAN_QUALITY_REFRESH_SECONDS", 10, minimum=0, maximum=3600)
# ... and for at most this long after the first change they do not count the pages show the
# last figures, saying that newer answers are being counted; after it (a worker down or busy)
# a page computes the figures itself.
PHYSICIAN_QUALITY_UPDATING_SECONDS = env_int("PHYSICIAN_QUALITY_UPDATING_SECONDS", 300, minimum=10, maximum=86_400)
# A physician is flagged for review when the whole interval of a figure stands apart from the
# other physicians' median: agreement (macro F1) below it by more than this margin ...
PHYSICIAN_OUTLIER_AGREEMENT_MARGIN = env_float("PHYSICIAN_OUTLIER_AGREEMENT_MARGIN", 0.10, minimum=0.0)
# ... median active time per labeling item above this multiple of it ...
PHYSICIAN_OUTLIER_SLOW_FACTOR = env_float("PHYSICIAN_OUTLIER_SLOW_FACTOR", 1.5, minimum=1.0)
# ... or a can't-judge rate above it by more than this margin.
PHYSICIAN_OUTLIER_CANT_JUDGE_MARGIN = env_float("PHYSICIAN_OUTLIER_CANT_JUDGE_MARGIN", 0.10, minimum=0.0)
# Gold items (annotation/services/gold.py): the share of the labeling and voting tasks given to a
# physician on trial that are gold items with a known answer (0.2: about one task in five).
GOLD_SHARE_FOR_TRIAL = env_float("GOLD_SHARE_FOR_TRIAL", 0.2, minimum=0.0, maximum=0.9)
# "Make active" suggests promoting a physician on trial once their gold accuracy reaches this
# share over at least GOLD_MIN_ITEMS answered gold items; nobody is promoted automatically.
GOLD_PROMOTION_ACCURACY = env_float("GOLD_PROMOTION_ACCURACY", 0.9, minimum=0.0, maximum=1.0)
GOLD_MIN_ITEMS = env_int("GOLD_MIN_ITEMS", 20, minimum=1, maximum=100_000)

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "django_htmx",
    "template_partials",
    "rest_framework",
    "rest_framework.authtoken",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "axes",
    "annotation",
    "grading",
]

MIDDLEWARE = [
    # First: an internal probe of /healthz/ is answered before the HTTPS redirect and the
    # host check, which would turn it into a 301 or a 400 (healthbench_web/health.py).
    "healthbench_web.health.HealthProbeMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "healthbench_web.middleware.RejectNulBytes",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    # Django's, with the user and their physician profile read in one query (healthbench_web/auth_user.py).
    "healthbench_web.auth_user.PhysicianAuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "healthbench_web.middleware.StyledNotFound",
    "healthbench_web.middleware.DatabaseUnavailable",
    # Last, as django-axes asks: turns a locked-out login into its refusal page.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "healthbench_web.urls"
WSGI_APPLICATION = "healthbench_web.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [PACKAGE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
            # {% translate %} in every template without a {% load i18n %} in each; then the same
            # tags, and {% url %}, kept per language when their arguments are constant.
            "builtins": ["django.templatetags.i18n", "healthbench_web.template_memo"],
        },
    },
]


def _database() -> dict:
    url = env_str("DATABASE_URL", "")
    if not url:
        return {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": VAR_DIR / "healthbench.sqlite3",
            # The web server and the worker write to the same file: wait for the lock
            # instead of failing with "database is locked".
            "OPTIONS": {"timeout": 30, "transaction_mode": "IMMEDIATE"},
        }
    try:
        config = dj_database_url.parse(url, conn_max_age=60)
    except ValueError as exc:
        raise ImproperlyConfigured(f"DATABASE_URL is not a database URL: {exc}") from None
    if config.get("ENGINE") not in ("django.db.backends.postgresql", "django.db.backends.sqlite3"):
        raise ImproperlyConfigured(f"DATABASE_URL must name PostgreSQL or SQLite, not {config.get('ENGINE')}")
    if config["ENGINE"] == "django.db.backends.postgresql":
        # An unreachable server is a 503 after this many seconds (healthbench_web.errors), not a
        # request held for the operating system's TCP timeout. DATABASE_URL's ?connect_timeout= wins.
        config.setdefault("OPTIONS", {}).setdefault("connect_timeout", 5)
    return dict(config)


DATABASES = {"default": _database()}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Tests that start real worker processes need a test database those processes can
    # open: a file, not SQLite's in-memory default; one per session, like PostgreSQL's below.
    DATABASES["default"]["TEST"] = {"NAME": env_str("TEST_DATABASE_NAME", str(VAR_DIR / f"test-{os.getpid()}.sqlite3"))}
# Points this process at another database of the same server, or another SQLite file: a
# worker started by a test is given the test database's name here.
if env_str("DATABASE_NAME", ""):
    DATABASES["default"]["NAME"] = env_str("DATABASE_NAME", "")
if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    # Several test sessions may share one server (developers, CI): give each its own test
    # database unless TEST_DATABASE_NAME says which one to use (a worker joining a test).
    DATABASES["default"]["TEST"] = {
        "NAME": env_str("TEST_DATABASE_NAME", f"test_{DATABASES['default']['NAME']}_{os.getpid()}")
    }
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Caches --------------------------------------------------------------------------------
# Run reports and meta-eval results (computed once per progress step of a run), API throttle
# counts and sessions live here. With Redis every gunicorn process and worker shares them;
# without, each process keeps its own (fine for scripts/run's one server process).
# CACHE_URL defaults to REDIS_URL: the cache's keys carry CACHE_KEY_PREFIX and a time to live,
# so they sit beside Celery's queues in the same database (run Redis with
# maxmemory-policy volatile-lru, as docker-compose.yml does, so only cache keys are evicted).
CACHE_URL = env_url("CACHE_URL", env_str("REDIS_URL", ""), schemes=("redis", "rediss"))
CACHE_KEY_PREFIX = env_str("CACHE_KEY_PREFIX", "healthbench")
# Two aliases of the same store. "default" holds what can be computed again, and treats a Redis
# outage as an empty cache (healthbench_web/forgiving_cache.py), so pages keep working. "strict"
# raises the error, for what must notice the outage: /healthz/ and the API limits' counts.
if CACHE_URL:
    _redis_cache = {
        "LOCATION": CACHE_URL,
        "KEY_PREFIX": CACHE_KEY_PREFIX,
        # A Redis outage should cost a request milliseconds (a refused connection) or at most
        # seconds (an unanswered one), not hang it; the health check says why.
        "OPTIONS": {"socket_connect_timeout": 1, "socket_timeout": 2},
    }
    CACHES = {
        "default": {"BACKEND": "healthbench_web.forgiving_cache.ForgivingRedisCache", **_redis_cache},
        "strict": {"BACKEND": "django.core.cache.backends.redis.RedisCache", **_redis_cache},
    }
else:
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.locmem.LocMemCache",
            "KEY_PREFIX": CACHE_KEY_PREFIX,
            # A paper-size report holds ~2 MB of arrays: keep a few dozen runs, not 300 entries.
            "OPTIONS": {"MAX_ENTRIES": 100},
        }
    }
    # The same process memory under both names (one LOCATION): nothing here can be down.
    CACHES["strict"] = CACHES["default"]

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

# --- Failed logins ---------------------------------------------------------------------------
# django-axes counts failed logins (login page and /api/token/) per account and, separately, per
# client address, in the database, so the limit holds while Redis is down. After
# LOGIN_FAILURE_LIMIT failures that account or address cannot log in, even with the right
# password, until LOGIN_LOCKOUT_MINUTES after its last failure (tries while paused do not extend
# it); a curator lifts it sooner by deleting its row in the admin's Access attempts.
# healthbench_web/login_limits.py gives the address (API_NUM_PROXIES) and the refusal page.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
LOGIN_FAILURE_LIMIT = env_int("LOGIN_FAILURE_LIMIT", 10, minimum=1)
LOGIN_LOCKOUT_MINUTES = env_int("LOGIN_LOCKOUT_MINUTES", 15, minimum=1)
AXES_FAILURE_LIMIT = LOGIN_FAILURE_LIMIT
AXES_COOLOFF_TIME = timedelta(minutes=LOGIN_LOCKOUT_MINUTES)
AXES_LOCKOUT_PARAMETERS = ["username", "ip_address"]
AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT = False
AXES_CLIENT_IP_CALLABLE = "healthbench_web.login_limits.client_address"
AXES_LOCKOUT_CALLABLE = "healthbench_web.login_limits.lockout_response"
# Not its "AXES: BEGIN" line at every start of every process and command; lockouts are still logged.
AXES_VERBOSE = False

# Sessions live in the database alone: a cached_db session raises when Redis is down, which
# would log every user out of every page (one indexed read per request is cheap; it is read
# without the ORM, healthbench_web/session_store.py).
SESSION_ENGINE = "healthbench_web.session_store"

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

# The interface's own strings are marked for translation (templates: {% translate %}, marked
# by scripts/mark_translations.py; Python: gettext). A translation is a catalogue in
# healthbench_web/locale/<lang>/LC_MESSAGES (manage.py makemessages -l <lang>, then compilemessages); no code.
LANGUAGE_CODE = "en-us"
LOCALE_PATHS = [PACKAGE_DIR / "locale"]
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [PACKAGE_DIR / "static"]
STATIC_ROOT = Path(env_str("STATIC_ROOT", str(VAR_DIR / "staticfiles")))
# WhiteNoise warns at start-up when the folder is missing (before the first collectstatic).
STATIC_ROOT.mkdir(parents=True, exist_ok=True)
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"
        if not DEBUG
        else "django.contrib.staticfiles.storage.StaticFilesStorage"
    },
}

# Celery: Redis when configured, otherwise kombu's filesystem transport under var/, which
# needs no server and still lets a separate worker process take the tasks.
REDIS_URL = env_str("REDIS_URL", "")
CELERY_BROKER_URL = env_str("CELERY_BROKER_URL", REDIS_URL or "filesystem://")
# The test suite gives each session a broker folder and a queue of its own (tests/isolation.py),
# so that a development worker on the same folder or Redis never takes a test's tasks.
BROKER_DIR = Path(env_str("CELERY_BROKER_DIR", str(VAR_DIR / "broker")))
# Two queues from one prefix, so that policy sampling (long generations) and grading (short
# calls) can get workers of their own: a batch of a run that samples goes to the sampling
# queue, every other task to the grading queue. A worker started without -Q takes both.
CELERY_QUEUE_PREFIX = env_str("CELERY_QUEUE_PREFIX", "healthbench")
CELERY_SAMPLING_QUEUE = f"{CELERY_QUEUE_PREFIX}.sampling"
CELERY_GRADING_QUEUE = f"{CELERY_QUEUE_PREFIX}.grading"
CELERY_TASK_DEFAULT_QUEUE = CELERY_GRADING_QUEUE
# Releases before the two queues put every task on Celery's default queue, `celery`: each
# worker's sweep moves what it finds there (grading/pipeline/legacy_queue.py).
CELERY_LEGACY_QUEUE = env_str("CELERY_LEGACY_QUEUE", "celery")
# Each queue with an exchange and routing key of its own: a Queue given only a name would be
# bound to the default exchange with the default routing key, and get the other queue's tasks.
CELERY_TASK_QUEUES = [
    Queue(name, Exchange(name), routing_key=name) for name in (CELERY_GRADING_QUEUE, CELERY_SAMPLING_QUEUE)
]
CELERY_BROKER_TRANSPORT_OPTIONS: dict = {}
if CELERY_BROKER_URL.startswith("filesystem://"):
    for sub in ("in", "processed", "control"):
        (BROKER_DIR / sub).mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(BROKER_DIR / "in"),
        "data_folder_out": str(BROKER_DIR / "in"),
        "processed_folder": str(BROKER_DIR / "processed"),
        # Otherwise kombu keeps its exchange files in ./control under the working directory.
        "control_folder": str(BROKER_DIR / "control"),
        "store_processed": False,
    }
elif not CELERY_BROKER_URL.startswith(("redis://", "rediss://", "amqp://", "memory://")):
    raise ImproperlyConfigured(f"CELERY_BROKER_URL={CELERY_BROKER_URL!r} is not a broker URL Celery can use here")
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", False)
# A task is acknowledged only after it finished, and given back when its worker dies, so
# a killed worker loses no work; the tasks themselves are idempotent.
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_TIME_LIMIT = env_int("CELERY_TASK_TIME_LIMIT", 600, minimum=10)
CELERY_TASK_SOFT_TIME_LIMIT = CELERY_TASK_TIME_LIMIT - 5
# A worker process is replaced after this many tasks, or once it holds more than this much
# memory, so that a leak or a large report computed in a worker never accumulates.
CELERY_WORKER_MAX_TASKS_PER_CHILD = env_int("CELERY_WORKER_MAX_TASKS_PER_CHILD", 100, minimum=1)
CELERY_WORKER_MAX_MEMORY_PER_CHILD = 1024 * env_int("CELERY_WORKER_MAX_MEMORY_MB", 1024, minimum=64)
# A grading task renews the lease on its batch while it works; when a worker dies, another
# worker's sweep (every GRADING_SWEEP_SECONDS) queues the batch again once the lease ran out.
GRADING_LEASE_SECONDS = env_int("GRADING_LEASE_SECONDS", 60, minimum=2)
GRADING_SWEEP_SECONDS = env_int("GRADING_SWEEP_SECONDS", 15, minimum=1)
# A batch that waits this long without a message in the broker (queued), or claimed without a
# lease, is published again by the sweep's reconciler (grading.pipeline.reconcile).
GRADING_RECONCILE_SECONDS = env_int("GRADING_RECONCILE_SECONDS", 60, minimum=1)
if CELERY_BROKER_URL.startswith(("redis://", "rediss://")):
    # Redis hands an unacknowledged message to another worker after the visibility timeout.
    # Tasks are acknowledged when they end (acks late), so it must outlast the longest task
    # (the hard time limit) plus the longest retry delay (a batch waits up to 2**4 s), or a
    # task still running would be delivered twice. Past that, it only adds to the recovery
    # that the lease sweep already gives within GRADING_LEASE_SECONDS + GRADING_SWEEP_SECONDS.
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "visibility_timeout": env_int(
            "CELERY_VISIBILITY_TIMEOUT", CELERY_TASK_TIME_LIMIT + 60, minimum=CELERY_TASK_TIME_LIMIT + 20
        )
    }

# Grader and policy endpoints (grading.models.Endpoint; rules in grading.endpoint_rules).
# Curators configure endpoints; researchers only choose them by name. A worker reads an
# endpoint's API key only from a variable on ENDPOINT_KEY_VARIABLES, and sends it only to
# that endpoint's base URL. Django's own settings and the variables these settings read
# (SECRET_KEY, DATABASE_URL, REDIS_URL, ...) can never be on the list: start-up stops.
ENDPOINT_KEY_VARIABLES = endpoint_key_variables(env_list("ENDPOINT_KEY_VARIABLES", ["OPENAI_API_KEY"]))
# Base URLs: http(s) only; link-local and cloud metadata addresses (169.254.0.0/16, fe80::/10,
# metadata.google.internal, ...) always refused; loopback and private networks only with
# ENDPOINT_ALLOW_PRIVATE_NETWORKS=1 (a vLLM or Ollama server beside the workers, the tests);
# with ENDPOINT_ALLOWED_HOSTS set, only those host names (a leading "*." matches subdomains).
ENDPOINT_ALLOWED_HOSTS = env_list("ENDPOINT_ALLOWED_HOSTS", [])
ENDPOINT_ALLOW_PRIVATE_NETWORKS = env_bool("ENDPOINT_ALLOW_PRIVATE_NETWORKS", False)
# A batch stops its run after this many consecutive calls failed with the same transport
# error (an outage, a wrong URL): the run ends "failed" with that error instead of grinding
# through retries. Refused connections, unknown hosts and 401/403/404 stop it at once.
GRADING_FAILURE_STREAK = env_int("GRADING_FAILURE_STREAK", 24, minimum=1)
# The most a grader or policy reply may hold after inflation; a longer one is a failed call
# ("reply too large"), read no further (grading/pipeline/bounded_transport.py).
GRADING_REPLY_MAX_BYTES = env_int("GRADING_REPLY_MAX_BYTES", 4 * 1024 * 1024, minimum=64 * 1024)
# Batched runs (the provider's Batch API, grading.pipeline.provider_batches): how often a
# RunBatch polls its provider batches, the provider's limits per batch file (OpenAI: 50,000
# requests and 200 MB), and the grades of one RunBatch (each is one or more provider batches).
GRADING_BATCH_POLL_SECONDS = env_float("GRADING_BATCH_POLL_SECONDS", 60.0, minimum=0.05)
GRADING_BATCH_MAX_REQUESTS = env_int("GRADING_BATCH_MAX_REQUESTS", 50_000, minimum=1, maximum=50_000)
GRADING_BATCH_MAX_BYTES = env_int("GRADING_BATCH_MAX_BYTES", 200 * 1024 * 1024, minimum=1024, maximum=200 * 1024 * 1024)
GRADING_BATCHED_RUN_UNIT = env_int("GRADING_BATCHED_RUN_UNIT", 5_000, minimum=1)

# Proxies in front that append to X-Forwarded-For: the API throttles and the failed-login limit
# take the client's address from it (healthbench_web/login_limits.py).
API_NUM_PROXIES = env_int("API_NUM_PROXIES", 0, minimum=0, maximum=5)
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        # Token first, so an anonymous request gets 401 with a WWW-Authenticate header.
        "rest_framework.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_RENDERER_CLASSES": [
        # Survives a lone surrogate in the data (see healthbench_web/renderers.py).
        "healthbench_web.renderers.SafeJSONRenderer",
        "rest_framework.renderers.BrowsableAPIRenderer",
    ],
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.PageNumberPagination",
    "PAGE_SIZE": 50,
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    # Throttle counts are kept in the default cache (shared by all processes with Redis). The
    # client's address is REMOTE_ADDR unless API_NUM_PROXIES says how many proxies in front
    # append to X-Forwarded-For; trusting that header without a proxy would let anyone pick
    # their own address.
    "NUM_PROXIES": API_NUM_PROXIES,
}
# --- API limits ------------------------------------------------------------------------------
# Launching a run starts paid LLM calls; a token request checks a password. Both are limited
# per user (per address for token requests); dry runs (the estimate) are not counted.
API_RUN_LAUNCH_RATE = env_rate("API_RUN_LAUNCH_RATE", "30/hour")
API_TOKEN_RATE = env_rate("API_TOKEN_RATE", "10/minute")
SPECTACULAR_SETTINGS = {
    "TITLE": "HealthBench Studio API",
    "DESCRIPTION": "Conversations, rubrics, subsets, grading runs and their reports. "
    "Authenticate with a token from /api/token/ (header `Authorization: Token <key>`) or a session.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    # The schema describes the API, not data: anyone may read it, as with any public API.
    "SERVE_PERMISSIONS": ["rest_framework.permissions.AllowAny"],
    # Swagger UI assets are served from this site, not a CDN.
    "SWAGGER_UI_DIST": "SIDECAR",
    # One name for the grading mode wherever it appears (a run's, a grade's, the grader block's).
    "ENUM_NAME_OVERRIDES": {"GradingModeEnum": "grading.models.GradingMode"},
    # The refusals every view can give (401, 403, 404, 400, 429, 503), documented beside its answers.
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "healthbench_web.api_schema.document_refusals",
    ],
}

if not DEBUG:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", True)
    # An internal probe speaks plain HTTP (HealthProbeMiddleware answers it first anyway).
    SECURE_REDIRECT_EXEMPT = [r"^healthz/$"]
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 31536000, minimum=0)
    # Both widen HSTS beyond this host: includeSubDomains to every subdomain of its domain, and
    # preload (once the domain is submitted to the browsers' list) to every browser, for good.
    # A site under a shared company domain turns them off rather than bind its neighbours.
    SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", True)
    SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", True)
    SECURE_CONTENT_TYPE_NOSNIFF = True

# --- Logs ------------------------------------------------------------------------------------
# One line per record with its time and level: readable text, or with LOG_FORMAT=json one JSON
# object per line for a log collector. Web processes and Celery workers use the same handler.
LOG_FORMAT = env_choice("LOG_FORMAT", "text", ("text", "json"))
LOG_LEVEL = env_choice("LOG_LEVEL", "INFO", ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"))
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "text": {"()": "healthbench_web.log_format.TextFormatter"},
        "json": {"()": "healthbench_web.log_format.JsonFormatter"},
    },
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": LOG_FORMAT}},
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
    # httpx logs every request at INFO: hundreds of lines a second from a grading worker. The
    # pipeline logs per batch (grading.pipeline.batches); a failed call is in its grade's error.
    "loggers": {"httpx2": {"level": "WARNING"}},
}
