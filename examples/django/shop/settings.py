"""The smallest Django project a webhook receiver needs: no ORM database (the
receiver talks to PostgreSQL through psycopg and the webhook-dedup package,
../../clients/python), no middleware (no CSRF check: a provider signs its
deliveries, and webhook_receive verifies that signature), one URL module."""

import secrets

SECRET_KEY = secrets.token_hex(32)  # signs nothing here (no sessions, no CSRF)
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]  # add your public host name
ROOT_URLCONF = "shop.urls"
INSTALLED_APPS: list = []
MIDDLEWARE: list = []
DATABASES: dict = {}
USE_TZ = True
# GitHub caps a delivery's payload at 25 MB. The view reads the body with
# from_django, which refuses a larger one itself (413, before reading the
# rest) and does not go through request.body, which this setting guards;
# kept equal for any other view that reads request.body
DATA_UPLOAD_MAX_MEMORY_SIZE = 25 * 1024 * 1024
LOGGING = {"version": 1, "disable_existing_loggers": False,
           "handlers": {"stderr": {"class": "logging.StreamHandler"}},
           "root": {"handlers": ["stderr"], "level": "WARNING"}}
