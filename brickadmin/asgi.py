"""
ASGI config for brickadmin project.

It exposes the ASGI callable as a module-level variable named ``application``.

For more information on this file, see
https://docs.djangoproject.com/en/5.2/howto/deployment/asgi/
"""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "brickadmin.settings")
# No persistent database connections in the web process (see DATABASES in settings.py).
os.environ.setdefault("BRICK_DB_CONN_MAX_AGE", "0")
# On PostgreSQL, at most this many connections, borrowed from a pool (see DATABASES in settings.py).
os.environ.setdefault("BRICK_DB_POOL", "8")

application = get_asgi_application()
