"""A Django receiver in one file: gunicorn django_app:application (in a
project, the settings are in settings.py, the pool and the view in a views
module, the URL in urls.py)."""
import logging
import os

from django.conf import settings

settings.configure(ROOT_URLCONF=__name__, ALLOWED_HOSTS=os.environ.get("ALLOWED_HOSTS", "localhost").split(","),
                   SECRET_KEY=os.environ.get("DJANGO_SECRET_KEY", "unused: no sessions, no CSRF tokens"))

from django.core.wsgi import get_wsgi_application  # noqa: E402 - after the settings
from django.urls import path  # noqa: E402
from django.views.decorators.csrf import csrf_exempt  # noqa: E402
from django.views.decorators.http import require_POST  # noqa: E402
from psycopg_pool import ConnectionPool  # noqa: E402
from webhook_dedup import BodyTooLarge, answer_after, sync  # noqa: E402
from webhook_dedup.frameworks import from_django, to_django  # noqa: E402

pool = ConnectionPool("", kwargs={"autocommit": True}, open=True)   # libpq's PG* variables
with pool.connection() as conn:
    # at start-up: NotReady says what to run or grant; the answer to a
    # database error is read now, while the database answers
    ERROR_ANSWER = sync.prepare_receiver(conn)


def job(conn, claim):
    # your work, in the claim's transaction: it commits with webhook_complete or not at all
    conn.execute("INSERT INTO events (idem_key) VALUES (%s)", (claim.idem_key,))
    return {"status": "processed"}                           # stored, answered to every copy


@csrf_exempt                                                 # the provider signs; webhook_receive verifies
@require_POST
def github(request):
    try:
        body, headers = from_django(request)                 # the exact bytes (25 MB at most)
    except BodyTooLarge as refused:
        return to_django(refused.answer)                     # 413; the rest of the body is never read
    try:
        with pool.connection() as conn:
            delivery = sync.receive(conn, "github", body, headers, lease="30 seconds")
        if not delivery.must_process:
            return to_django(delivery.answer)                # duplicate, conflict, 401, 503 in progress, ...
        done = sync.with_claim(pool, delivery, job)          # the job must end within the lease
        if done.status == "completed":
            return to_django(answer_after(delivery, done.result))
        if done.status == "lease_lost":                      # another worker took the key over
            with pool.connection() as conn:
                return to_django(sync.http_answer(conn, "lease_lost", scheme="github"))
        return to_django(ERROR_ANSWER)                       # the job failed: 500, the provider retries
    except Exception:                                        # the database failed: the answer read at start-up
        logging.exception("a GitHub delivery")
        return to_django(ERROR_ANSWER)


urlpatterns = [path("webhooks/github", github)]
application = get_wsgi_application()
