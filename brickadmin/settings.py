"""brickadmin settings, read from the environment.

Defaults give the zero-setup demo: SQLite, the simulated cluster (twin) and a
Celery broker on the local filesystem. Production sets DJANGO_DEBUG=0,
DJANGO_SECRET_KEY, DJANGO_ALLOWED_HOSTS, DATABASE_URL, REDIS_URL and either
BRICK_KUBECONFIG or BRICK_IN_CLUSTER=1.
"""

import ipaddress
import os
from datetime import timedelta
from pathlib import Path

import dj_database_url
from django.utils.translation import gettext_lazy as _

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("BRICK_VAR_DIR", BASE_DIR / "var"))
VAR_DIR.mkdir(parents=True, exist_ok=True)


def env_bool(name: str, default: bool) -> bool:
    return os.environ.get(name, "1" if default else "0").lower() in ("1", "true", "yes", "on")


DEBUG = env_bool("DJANGO_DEBUG", True)
SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "")
if not SECRET_KEY:
    if not DEBUG:
        raise RuntimeError("DJANGO_SECRET_KEY must be set when DJANGO_DEBUG=0")
    SECRET_KEY = "dev-only-insecure-key-not-for-production"  # noqa: S105 (demo/tests only)
ALLOWED_HOSTS = [h for h in os.environ.get("DJANGO_ALLOWED_HOSTS", "localhost,127.0.0.1,[::1]").split(",") if h]
CSRF_TRUSTED_ORIGINS = [o for o in os.environ.get("DJANGO_CSRF_TRUSTED_ORIGINS", "").split(",") if o]

INSTALLED_APPS = [
    "brickadmin.apps.ConsoleAdminConfig",  # django.contrib.admin, read-only (brickadmin/admin.py)
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "django_htmx",
    "template_partials",
    "axes",  # sign-in lockouts (django-axes)
    "brickadmin.sso",  # single sign-on with OpenID Connect (mozilla-django-oidc)
    "brickadmin.cluster",
    "brickadmin.accounts",  # personal settings: the time zone times are shown in
    "gpus",
    "workspaces",
]

MIDDLEWARE = [
    "brickadmin.probes.ProbeMiddleware",  # /healthz, /readyz: before https and host checks (kubelet probes)
    "django.middleware.security.SecurityMiddleware",
    "brickadmin.middleware.ContentSecurityPolicyMiddleware",  # no inline script or style (htmx included)
    "whitenoise.middleware.WhiteNoiseMiddleware",  # static files under gunicorn
    "brickadmin.middleware.SlidingSessionMiddleware",  # Django's, the idle count restarted while used
    "django.middleware.locale.LocaleMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "brickadmin.middleware.NoStoreMiddleware",  # Cache-Control: no-store for whoever is signed in
    "brickadmin.middleware.RequestInputMiddleware",  # NUL, control characters, overlong queries: a 400
    "brickadmin.lockout.AccountBudgetMiddleware",  # sign-in: an account's guesses across addresses
    "brickadmin.accounts.middleware.TimezoneMiddleware",  # the chosen zone, else the browser's, else TIME_ZONE_DISPLAY
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "brickadmin.middleware.ClusterErrorMiddleware",
    "brickadmin.middleware.DatabaseErrorMiddleware",  # read-only or unreachable database: a 503 page
    "gpus.middleware.OneGenerationMiddleware",  # a page reads one generation of the cluster view
    "django.contrib.auth.middleware.LoginRequiredMiddleware",  # every view needs a login unless marked
    "axes.middleware.AxesMiddleware",  # last, as django-axes asks: the lockout page
]

ROOT_URLCONF = "brickadmin.urls"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "django.template.context_processors.i18n",
                "brickadmin.context_processors.cluster_banner",
                "gpus.context_processors.view_freshness",
                "brickadmin.accounts.context_processors.unread_notifications",
            ],
        },
    },
]

WSGI_APPLICATION = "brickadmin.wsgi.application"

# Persistent connections for the worker, beat and watcher (one thread each, reused); the web
# process (ASGI, brickadmin/asgi.py) sets 0: it runs each request's sync code in a thread of
# its own, so a kept connection is never reused and they pile up to "too many clients"
# (bench/load.py: 941 refused connections in 10 minutes of 55 people; Django's ASGI docs).
DATABASES = {
    "default": dj_database_url.config(
        default=f"sqlite:///{VAR_DIR / 'brickadmin.sqlite3'}",
        conn_max_age=int(os.environ.get("BRICK_DB_CONN_MAX_AGE", "60")),
    )
}
if DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    # Web and worker processes share the file: wait for locks instead of failing.
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {"timeout": 20, "transaction_mode": "IMMEDIATE", "init_command": "PRAGMA journal_mode=WAL;"}
    )
    DATABASES["default"]["CONN_MAX_AGE"] = 0
# The web process (brickadmin/asgi.py sets BRICK_DB_POOL) borrows its PostgreSQL connections from
# a pool of at most this many instead of opening one per request and per read of a run page's
# stream: on 2 busy cores a stream's first reads took 53 ms (p95 93 ms) on a new backend, 18 ms
# (p95 28 ms) on a borrowed one (bench/pg_connect.py, docs/benchmarks.md). Bounded, so open pages
# still never fill max_connections; a request that finds all of them busy waits up to 10 s for
# one, then gets the database-unavailable page.
DB_POOL_SIZE = int(os.environ.get("BRICK_DB_POOL", "0"))
if DB_POOL_SIZE > 0 and DATABASES["default"]["ENGINE"].endswith("postgresql"):
    DATABASES["default"]["CONN_MAX_AGE"] = 0  # Django's pool replaces persistent connections
    DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {
        "min_size": min(2, DB_POOL_SIZE),
        "max_size": DB_POOL_SIZE,
        "timeout": 10,
        "max_idle": 60,  # a burst's extra connections are closed a minute after it
    }

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

# --- sign-in lockouts (django-axes) ------------------------------------------
# Repeated failures lock out one username from one client address, for a cool-off counted from
# the failure that locked it: failures during the lockout neither count nor extend it, so no one
# can keep an admin out from their own address, and one person's typos behind a shared address
# lock out no one else. Every failure is recorded (AccessAttempt, AccessFailureLog); admins see
# the lockouts on the console's Sign-in lockouts page and unlock them there;
# `manage.py unlock_sign_in NAME` unlocks from the command line (the break-glass account).
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "brickadmin.sso.backend.LocalBackend",  # Django's ModelBackend; refuses users of the provider
]
AXES_FAILURE_LIMIT = int(os.environ.get("BRICK_LOGIN_FAILURE_LIMIT", "5"))
AXES_COOLOFF_TIME = timedelta(minutes=int(os.environ.get("BRICK_LOGIN_COOLOFF_MINUTES", "15")))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]  # the pair: a username from one address
AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT = False  # the wait is not restarted by more failures
AXES_ENABLE_ACCESS_FAILURE_LOG = True
# An account's budget across every address (brickadmin/lockout.py): past SLOW_AFTER failures
# within the cool-off an attempt from a browser that never signed in to it waits 1, 2, 4 ... 60 s
# after the last failure; at FAILURE_LIMIT such browsers are locked out of it until failures
# age out of the cool-off or an admin unlocks it. Browsers that signed in to it before are not.
BRICK_LOGIN_ACCOUNT_SLOW_AFTER = int(os.environ.get("BRICK_LOGIN_ACCOUNT_SLOW_AFTER", "10"))
BRICK_LOGIN_ACCOUNT_FAILURE_LIMIT = int(os.environ.get("BRICK_LOGIN_ACCOUNT_FAILURE_LIMIT", "20"))
AXES_HANDLER = "brickadmin.lockout.LockoutHandler"  # failures refused while locked are logged too
AXES_ENABLE_ADMIN = False  # its records are shown read-only by brickadmin/admin.py
AXES_LOCKOUT_CALLABLE = "brickadmin.lockout.lockout_response"
AXES_CLIENT_IP_CALLABLE = "brickadmin.lockout.client_ip"
AXES_WHITELIST_CALLABLE = "brickadmin.lockout.provider_sign_in"  # single sign-on: the provider locks
# Behind a reverse proxy every request comes from the proxy: give the number of proxies that
# append to X-Forwarded-For (the chart's trustedProxyCount) so the client's own address is the
# one locked out; addresses a client writes into the header itself are never read.
BRICK_TRUSTED_PROXY_COUNT = int(os.environ.get("BRICK_TRUSTED_PROXY_COUNT", "0"))
# The proxies' addresses or networks (comma-separated, the chart's trustedProxies): the header is
# read only when the request comes from one of them; empty: from any peer (the chart's
# NetworkPolicy then admits only the ingress controller's namespace).
BRICK_TRUSTED_PROXIES = [p.strip() for p in os.environ.get("BRICK_TRUSTED_PROXIES", "").split(",") if p.strip()]
for _proxy in BRICK_TRUSTED_PROXIES:
    try:
        ipaddress.ip_network(_proxy, strict=False)
    except ValueError:
        raise RuntimeError(f"BRICK_TRUSTED_PROXIES: {_proxy!r} is not an address or a network") from None

# --- sessions ----------------------------------------------------------------
# A local sign-in lasts BRICK_SESSION_IDLE_HOURS without a request (8: a working day); a request
# starts the count again (brickadmin.middleware.SlidingSessionMiddleware: the equivalent of
# SESSION_SAVE_EVERY_REQUEST, one write a minute at most). Single sign-on sessions keep their
# own bound below.
SESSION_COOKIE_AGE = int(float(os.environ.get("BRICK_SESSION_IDLE_HOURS", "8")) * 3600)

# --- single sign-on (OpenID Connect; docs/operator-guide.md#single-sign-on) ---------------
# Off unless BRICK_OIDC_ISSUER is set (the demo). Users of the provider are identified by
# (issuer, sub); the admin role comes from membership of BRICK_OIDC_ADMIN_GROUP in the groups
# claim, re-read at every sign-in; local accounts keep working (break-glass).
BRICK_OIDC_ISSUER = os.environ.get("BRICK_OIDC_ISSUER", "").strip()
BRICK_OIDC_ENABLED = bool(BRICK_OIDC_ISSUER)
OIDC_RP_CLIENT_ID = os.environ.get("BRICK_OIDC_CLIENT_ID", "")
OIDC_RP_CLIENT_SECRET = os.environ.get("BRICK_OIDC_CLIENT_SECRET", "")
if BRICK_OIDC_ENABLED and not (OIDC_RP_CLIENT_ID and OIDC_RP_CLIENT_SECRET):
    raise RuntimeError("BRICK_OIDC_ISSUER is set: BRICK_OIDC_CLIENT_ID and BRICK_OIDC_CLIENT_SECRET are required")
BRICK_OIDC_ADMIN_GROUP = os.environ.get("BRICK_OIDC_ADMIN_GROUP", "")  # empty: nobody is admin by the provider
BRICK_OIDC_GROUPS_CLAIM = os.environ.get("BRICK_OIDC_GROUPS_CLAIM", "groups")  # dotted: realm_access.roles
# The most groups one sign-in makes a user a member of (and creates): the admin group and
# existing groups first. A token naming more is logged; the admin role still reads it whole.
BRICK_OIDC_GROUPS_MAX = int(os.environ.get("BRICK_OIDC_GROUPS_MAX", "200"))
BRICK_OIDC_PROVIDER_NAME = os.environ.get("BRICK_OIDC_PROVIDER_NAME", "")  # the button; default: the issuer's host
OIDC_RP_SCOPES = os.environ.get("BRICK_OIDC_SCOPES", "openid profile email groups")
BRICK_OIDC_DISCOVERY_CACHE_SECONDS = int(os.environ.get("BRICK_OIDC_DISCOVERY_CACHE_SECONDS", "3600"))
BRICK_OIDC_CLOCK_SKEW_SECONDS = int(os.environ.get("BRICK_OIDC_CLOCK_SKEW_SECONDS", "60"))
# A provider sign-in's console session ends after this long (the role and groups are re-read
# at the next sign-in); local sessions keep Django's SESSION_COOKIE_AGE.
BRICK_OIDC_SESSION_SECONDS = int(os.environ.get("BRICK_OIDC_SESSION_SECONDS", str(8 * 3600)))
OIDC_VERIFY_SSL = os.environ.get("BRICK_OIDC_CA_BUNDLE") or True  # a CA file for a private provider
OIDC_TIMEOUT = float(os.environ.get("BRICK_OIDC_TIMEOUT", "10"))
OIDC_RP_SIGN_ALGO = "RS256"
OIDC_USE_NONCE = True
OIDC_USE_PKCE = True  # S256
OIDC_STORE_ID_TOKEN = True  # the id_token_hint of the logout that ends the provider's session
OIDC_TOKEN_USE_BASIC_AUTH = True  # client_secret_basic, the token endpoint's default
OIDC_CREATE_USER = True
if BRICK_OIDC_ENABLED:
    AUTHENTICATION_BACKENDS.append("brickadmin.sso.backend.ProviderBackend")

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "dashboard"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en"
LANGUAGES = [("en", _("English")), ("ko", _("Korean"))]
LOCALE_PATHS = [BASE_DIR / "locale"]
TIME_ZONE = os.environ.get("TZ_NAME", "UTC")
# The zone pages show times in when neither the person's preference nor their browser (the
# brick_tz cookie static/js/timezone.js sets) names one: e.g. Asia/Seoul for a site in Korea.
TIME_ZONE_DISPLAY = os.environ.get("TIME_ZONE_DISPLAY", "UTC")
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
# The image bakes the collected files in (BRICK_STATIC_ROOT=/app/staticfiles): a read-only root
# filesystem, and no pod has to collect them.
STATIC_ROOT = Path(os.environ.get("BRICK_STATIC_ROOT", VAR_DIR / "staticfiles"))
STATIC_ROOT.mkdir(exist_ok=True)  # WhiteNoise warns when it is missing
if not DEBUG:
    # Hashed, compressed files from `collectstatic`, served by WhiteNoise.
    STORAGES = {
        "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
        "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
    }

# --- security (production: DJANGO_DEBUG=0 passes `check --deploy`) ----------
SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_HTTPONLY = False  # htmx reads the token from the page, not the cookie
X_FRAME_OPTIONS = "DENY"
if not DEBUG:
    SECURE_SSL_REDIRECT = env_bool("DJANGO_SECURE_SSL_REDIRECT", True)
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_HSTS_SECONDS = int(os.environ.get("DJANGO_HSTS_SECONDS", "31536000"))
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = True
    SECURE_CONTENT_TYPE_NOSNIFF = True

# --- Celery ------------------------------------------------------------------
REDIS_URL = os.environ.get("REDIS_URL", "")
if REDIS_URL:
    CELERY_BROKER_URL = REDIS_URL
    CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": 3600}
    CELERY_BROKER_TRANSPORT = None  # the URL's
else:
    # Embedded broker for the zero-setup demo: kombu's filesystem transport.
    _broker_dir = VAR_DIR / "broker"
    for _d in ("queue", "processed", "control"):
        (_broker_dir / _d).mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_URL = "filesystem://"
    # kombu's filesystem transport with whole-file writes and claims (brickadmin/broker.py): kombu's
    # own let a worker read a half-written message and die of a JSONDecodeError.
    CELERY_BROKER_TRANSPORT = "brickadmin.broker:Transport"
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(_broker_dir / "queue"),
        "data_folder_out": str(_broker_dir / "queue"),
        "processed_folder": str(_broker_dir / "processed"),
        "control_folder": str(_broker_dir / "control"),  # else kombu writes ./control
        "store_processed": False,
    }
CELERY_TASK_ACKS_LATE = True  # a task whose worker dies is redelivered; steps are idempotent
# A broker that restarts or is not up yet is waited for, however long (worker and beat alike):
# a pod that gave up after Celery's default 100 retries would need a person to restart it.
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BROKER_CONNECTION_MAX_RETRIES = None
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", False)
CELERY_TASK_IGNORE_RESULT = True
# Notifications go out on their own queue and worker (the chart's notify worker; bin/demo's):
# procedures and the reaper never wait behind a slow mail server or webhook.
CELERY_TASK_ROUTES = {"brickadmin.accounts.tasks.deliver": {"queue": "notify"}}
CELERY_BEAT_SCHEDULE = {
    "reap-stale-runs": {
        "task": "gpus.tasks.reap_stale_runs",
        "schedule": 5.0,
    },  # a dead worker's run resumes within ~15 s
    "prune-old-runs": {"task": "gpus.tasks.prune_old_runs", "schedule": 3600.0},
    # each run replaces the hour in progress with the cluster view as it is now (the hour's
    # figures are its last sample), then prunes what the retention leaves out
    "roll-up-showback": {"task": "workspaces.tasks.roll_up_showback", "schedule": 600.0},
    # Kueue read whole, a catch-up beside the watcher, which follows it (workspaces/elastic.py): the
    # pages while the watcher is down, an eviction whose Workload went between two publications
    "read-kueue": {"task": "workspaces.tasks.read_kueue", "schedule": 60.0},
    # each owner told once per cause of a GPU pod that waits or was refused (workspaces/waits.py)
    "tell-waiting-pods": {"task": "workspaces.tasks.tell_waiting_pods", "schedule": 60.0},
}

# --- the cluster -------------------------------------------------------------
BRICK_KUBECONFIG = os.environ.get("BRICK_KUBECONFIG", "")
BRICK_IN_CLUSTER = env_bool("BRICK_IN_CLUSTER", False)
# "twin" (simulated cluster in the database) unless a real cluster is configured.
BRICK_CLUSTER = os.environ.get("BRICK_CLUSTER", "kube" if (BRICK_KUBECONFIG or BRICK_IN_CLUSTER) else "twin")
PROMETHEUS_URL = os.environ.get("PROMETHEUS_URL", "")
PROMETHEUS_TIMEOUT = float(os.environ.get("PROMETHEUS_TIMEOUT", "3"))
BRICK_SNAPSHOT_CACHE_SECONDS = float(os.environ.get("BRICK_SNAPSHOT_CACHE_SECONDS", "0"))
# manage.py watch_cluster: how often DCGM figures are fetched from Prometheus (seconds), and
# the namespace of its leader-election Lease (the product's own; the Deployment sets POD_NAMESPACE)
BRICK_METRICS_INTERVAL = float(os.environ.get("BRICK_METRICS_INTERVAL", "30"))
# An allocation is idle when its Workspace has had no Running GPU pod, or (measured by DCGM)
# utilisation under this percentage, for this many hours (the Health registry's idle finding).
# The Pod Security level (privileged | baseline | restricted) a Workspace's namespace enforces
# when the product creates it: baseline by default (no privileged containers, host namespaces
# or hostPath; GPU pods run as before); "" adds no Pod Security label, which the chart's
# admission policy then refuses.
BRICK_WORKSPACE_POD_SECURITY = os.environ.get("BRICK_WORKSPACE_POD_SECURITY", "baseline").strip()
if BRICK_WORKSPACE_POD_SECURITY not in ("", "privileged", "baseline", "restricted"):
    raise RuntimeError("BRICK_WORKSPACE_POD_SECURITY must be privileged, baseline, restricted or empty")
BRICK_IDLE_HOURS = float(os.environ.get("BRICK_IDLE_HOURS", "24"))
# mig-manager's layouts ConfigMap when the GPU Operator's ClusterPolicy cannot be read (it names it
# in spec.migManager.config.name); empty: the ClusterPolicy's, else default-mig-parted-config
BRICK_MIG_PARTED_CONFIGMAP = os.environ.get("BRICK_MIG_PARTED_CONFIGMAP", "").strip()
BRICK_IDLE_UTILISATION_PERCENT = float(os.environ.get("BRICK_IDLE_UTILISATION_PERCENT", "5"))
# Pages call the watcher down (numbers may be out of date) after this long without a heartbeat.
BRICK_WATCHER_STALE_SECONDS = float(os.environ.get("BRICK_WATCHER_STALE_SECONDS", "30"))
# --- elastic quota on Kueue (docs/operator-guide.md#elastic-quota) ---
# The twin serves Kueue's APIs (a real cluster's discovery says whether it does).
BRICK_TWIN_KUEUE = env_bool("BRICK_TWIN_KUEUE", False)
# What an approval form proposes when Kueue is served: the burst ceiling (borrowingLimit) and the
# lend ceiling (lendingLimit) as percentages of the guarantee, rounded up; the guarantee is what
# the request asks for.
BRICK_KUEUE_BURST_PERCENT = int(os.environ.get("BRICK_KUEUE_BURST_PERCENT", "100"))
BRICK_KUEUE_LEND_PERCENT = int(os.environ.get("BRICK_KUEUE_LEND_PERCENT", "100"))
# How long the pages trust the last read of Kueue (served or not, its ClusterQueues): the watcher
# follows it (its beat says it is current), the beat reads it every 60 s; older than this, a page
# says it is not known.
BRICK_KUEUE_FACTS_SECONDS = float(os.environ.get("BRICK_KUEUE_FACTS_SECONDS", "120"))
BRICK_LEASE_NAMESPACE = os.environ.get("BRICK_LEASE_NAMESPACE") or os.environ.get("POD_NAMESPACE") or "brickadmin"

# --- product limits ----------------------------------------------------------
BRICK_DEFAULT_LIMITS = {"gpu": 4, "cpu": 16, "memory_gib": 64, "storage_gib": 200}
BRICK_RUN_RETENTION_DAYS = int(os.environ.get("BRICK_RUN_RETENTION_DAYS", "365"))
# An approval whose database went away (restarted, failed over) waits this long for it and is made again once.
BRICK_APPROVAL_DATABASE_WAIT_SECONDS = float(os.environ.get("BRICK_APPROVAL_DATABASE_WAIT_SECONDS", "10"))
# A transient API failure during an approval (API server restarting, 429, 5xx, timeout) is retried
# with backoff (1, 2, 4, then every 5 s) for this long from the first one, each retry recorded.
BRICK_APPROVAL_RETRY_SECONDS = float(os.environ.get("BRICK_APPROVAL_RETRY_SECONDS", "30"))
BRICK_APPROVAL_RETRY_BACKOFF = float(os.environ.get("BRICK_APPROVAL_RETRY_BACKOFF", "1.0"))  # first pause, doubled
# Showback (workspaces/showback_rollups.py): hourly and monthly physical GPU-hours kept this long.
BRICK_SHOWBACK_RETENTION_DAYS = int(os.environ.get("BRICK_SHOWBACK_RETENTION_DAYS", "400"))
# The run page's live stream (gpus/run_stream.py): on SQLite the web process looks at the file's
# data_version this often, once for all its open pages (on PostgreSQL a NOTIFY wakes it); a
# stream ends after BRICK_RUN_STREAM_SECONDS and the browser reconnects after what it saw; a
# comment keeps an idle stream open through proxies.
BRICK_RUN_STREAM_POLL_MS = int(os.environ.get("BRICK_RUN_STREAM_POLL_MS", "10"))
BRICK_RUN_STREAM_SECONDS = int(os.environ.get("BRICK_RUN_STREAM_SECONDS", "300"))
BRICK_RUN_STREAM_KEEPALIVE_SECONDS = int(os.environ.get("BRICK_RUN_STREAM_KEEPALIVE_SECONDS", "15"))
# A waiting stream holds no database connection (each read closes its own); a web process reads
# for this many streams at once, so a commit waking hundreds opens this many connections.
BRICK_RUN_STREAM_READS = int(os.environ.get("BRICK_RUN_STREAM_READS", "4"))
# Open streams a web process (a gunicorn worker) keeps, and one user's share of them; the next is
# refused (429 for the user's, 503 for the process's) with Retry-After this many seconds, and
# the run page polls the run's progress that often instead.
BRICK_RUN_STREAMS_PER_PROCESS = int(os.environ.get("BRICK_RUN_STREAMS_PER_PROCESS", "200"))
BRICK_RUN_STREAMS_PER_USER = int(os.environ.get("BRICK_RUN_STREAMS_PER_USER", "10"))
BRICK_RUN_STREAM_RETRY_AFTER_SECONDS = int(os.environ.get("BRICK_RUN_STREAM_RETRY_AFTER_SECONDS", "10"))
# Health reports the reaper (Celery beat + a worker; scheduled every 5 s) stopped after this long.
BRICK_REAPER_STALE_SECONDS = float(os.environ.get("BRICK_REAPER_STALE_SECONDS", "120"))
# Every page says the Celery worker (or its beat) stopped after this long without the reaper running.
BRICK_WORKER_STALE_SECONDS = float(os.environ.get("BRICK_WORKER_STALE_SECONDS", "30"))
BRICK_RUN_HEARTBEAT_STALE_SECONDS = int(os.environ.get("BRICK_RUN_HEARTBEAT_STALE_SECONDS", "10"))
BRICK_RUN_AUTO_RESUMES = int(os.environ.get("BRICK_RUN_AUTO_RESUMES", "3"))  # then a person resumes
PAGE_SIZE = 25

# --- notifications (brickadmin/notify.py) --------------------------------------
# Email through Django's SMTP backend; the chart's values set these (deploy/chart/values.yaml: smtp).
EMAIL_BACKEND = os.environ.get("EMAIL_BACKEND", "django.core.mail.backends.smtp.EmailBackend")
EMAIL_HOST = os.environ.get("EMAIL_HOST", "localhost")
EMAIL_PORT = int(os.environ.get("EMAIL_PORT", "25"))
EMAIL_HOST_USER = os.environ.get("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = os.environ.get("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", False)
EMAIL_USE_SSL = env_bool("EMAIL_USE_SSL", False)
EMAIL_TIMEOUT = float(os.environ.get("EMAIL_TIMEOUT", "10"))
DEFAULT_FROM_EMAIL = os.environ.get("DEFAULT_FROM_EMAIL", "brickadmin@localhost")
BRICK_PUBLIC_URL = os.environ.get("BRICK_PUBLIC_URL", "")  # links in emails and webhooks: https://console.example
BRICK_NOTIFY_RETRIES = int(os.environ.get("BRICK_NOTIFY_RETRIES", "4"))  # after the first attempt
BRICK_NOTIFY_RETRY_SECONDS = float(os.environ.get("BRICK_NOTIFY_RETRY_SECONDS", "30"))  # doubled each retry
BRICK_NOTIFY_TIMEOUT = float(os.environ.get("BRICK_NOTIFY_TIMEOUT", "10"))  # a webhook's answer, per read
# One send (an email or a webhook post), connecting and answering included: then it is cut and
# retried later. A peer trickling a header line every few seconds never trips a per-read timeout.
BRICK_NOTIFY_DEADLINE_SECONDS = float(os.environ.get("BRICK_NOTIFY_DEADLINE_SECONDS", "20"))
# Hosts chat webhooks may post to (comma-separated); empty: any host not on a loopback or
# link-local address (brickadmin/accounts/webhooks.py).
BRICK_WEBHOOK_ALLOWED_HOSTS = [h for h in os.environ.get("BRICK_WEBHOOK_ALLOWED_HOSTS", "").split(",") if h.strip()]

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
}
