"""Replay into staging: real GitHub deliveries received by the production
receiver are archived (keep_payload), exported with
webhook_dedup.export_deliveries in the webhook_dedup.delivery/1 format, and
re-sent by examples/replay/resend.py to a second receiver on a staging
database, re-signed with the staging secret, the guides' four ways: once,
twice in a row, two copies at the same instant, out of order. Each exported
body is byte-identical to what was sent, each re-signed copy verifies
with the staging secret (a 401 otherwise), and each event's side effect
runs exactly once in staging.
"""

import json
import os
import random
import subprocess
import sys
from collections import Counter

import psycopg
import pytest

from support import FIXTURES, RECEIVER, REPO, SECRET  # also puts examples/ on sys.path

import replay

RESEND = REPO / "examples" / "replay" / "resend.py"
STAGING_SECRET = "e2e-staging-secret"
STAGING_DB = f"staging_{os.getpid()}"
EVENTS = 12
MODES = {"once": [], "twice": ["--copies", "2"], "concurrent": ["--copies", "2", "--concurrent"],
         "out of order": ["--shuffle", "7"]}


@pytest.fixture(scope="module")
def staging_url(db_conn, tmp_path_factory):
    """A second example receiver, on a staging database of its own that
    knows only the staging secret."""
    db_conn.execute(f"CREATE DATABASE {STAGING_DB}")
    with psycopg.connect(dbname=STAGING_DB, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION webhook_dedup")
        conn.execute((RECEIVER.parent / "roles.sql").read_text())
    log = tmp_path_factory.mktemp("staging") / "receiver.log"
    with open(log, "wb") as stderr:
        proc = subprocess.Popen([sys.executable, str(RECEIVER), "--host", "127.0.0.1", "--port", "0",
                                 "--dsn", f"user=demo_receiver dbname={STAGING_DB}", "--secret", STAGING_SECRET,
                                 "--lease", "30 seconds"], stdout=subprocess.PIPE, stderr=stderr)
    try:
        from conftest import _wait_for_listening_line
        yield _wait_for_listening_line(proc, log) + "/webhooks/github"
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        proc.stdout.close()
        db_conn.execute(f"DROP DATABASE IF EXISTS {STAGING_DB} WITH (FORCE)")


@pytest.fixture(scope="module")
def archived(db_conn, receiver_url):
    """EVENTS real GitHub deliveries received in production with the
    archive on: (the bodies sent, by delivery id; the time range)."""
    had_row = db_conn.execute("SELECT count(*) FROM webhook_dedup.sources WHERE source = 'github'").fetchone()[0]
    db_conn.execute("INSERT INTO webhook_dedup.sources (source, keep_payload) VALUES ('github', true)"
                    " ON CONFLICT (source) DO UPDATE SET keep_payload = true")
    try:
        since = db_conn.execute("SELECT clock_timestamp()").fetchone()[0]
        fixtures = random.Random(11).sample(replay.load_fixtures(FIXTURES), EVENTS)
        sent = {}
        for f in fixtures:
            delivery_id = f"staging-{os.getpid()}-{len(sent)}"
            body = replay.as_new_event(f.body, delivery_id)
            headers = replay.github_headers(delivery_id, f.event, replay.sign(SECRET, body))
            answer = replay.post(receiver_url, body, headers)
            assert answer.status == 200, answer
            sent[delivery_id] = body
        until = db_conn.execute("SELECT clock_timestamp()").fetchone()[0]
        yield sent, since, until
    finally:
        if had_row:
            db_conn.execute("UPDATE webhook_dedup.sources SET keep_payload = NULL WHERE source = 'github'")
        else:
            db_conn.execute("DELETE FROM webhook_dedup.sources WHERE source = 'github'")


def test_an_export_replayed_into_staging_verifies_and_runs_each_event_once(db_conn, archived, staging_url,
                                                                           tmp_path):
    sent, since, until = archived
    rows = db_conn.execute(
        "SELECT event_id, payload, delivery FROM webhook_dedup.export_deliveries('github', %s, %s)"
        " WHERE event_id = ANY(%s)", (since, until, list(sent))).fetchall()
    assert sorted(r[0] for r in rows) == sorted(sent)
    for event_id, payload, delivery in rows:
        assert bytes(payload) == sent[event_id], "archived byte for byte"
        assert delivery["format"] == "webhook_dedup.delivery/1"
        # the headers as the receiver passed them (HTTP field names are
        # case-insensitive)
        headers = {k.lower(): v for k, v in delivery["headers"].items()}
        assert headers["x-github-delivery"] == event_id
    # the export, one JSON document per line, split into the four modes
    docs = [r[2] for r in rows]
    groups = {mode: docs[i::len(MODES)] for i, mode in enumerate(MODES)}
    answers = []
    for mode, flags in MODES.items():
        export = tmp_path / f"{mode.replace(' ', '_')}.jsonl"
        export.write_text("".join(json.dumps(d) + "\n" for d in groups[mode]))
        done = subprocess.run([sys.executable, str(RESEND), str(export), "--url", staging_url, "--secret",
                               STAGING_SECRET, "--dsn", f"dbname={STAGING_DB}", *flags],
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr
        lines = [json.loads(line) for line in done.stdout.splitlines()]
        assert len(lines) == len(groups[mode]) * (2 if "--copies" in flags else 1), mode
        answers += [(mode, a) for a in lines]
    # every copy verified with the staging secret and was answered 2xx
    assert all(a["status"] == 200 for _, a in answers), answers
    by_mode = {mode: Counter(a["outcome"] for m, a in answers if m == mode) for mode in MODES}
    assert by_mode["once"] == {"claimed": len(groups["once"])}
    assert by_mode["out of order"] == {"claimed": len(groups["out of order"])}
    for mode in ("twice", "concurrent"):
        assert by_mode[mode] == {"claimed": len(groups[mode]), "duplicate": len(groups[mode])}, by_mode
    # and each event's side effect ran exactly once in staging, none in
    # production a second time
    with psycopg.connect(dbname=STAGING_DB, autocommit=True) as staging:
        effects = Counter(r[0] for r in staging.execute("SELECT delivery_id FROM demo.side_effects").fetchall())
    assert effects == Counter({event_id: 1 for event_id in sent})
    prod = Counter(r[0] for r in db_conn.execute(
        "SELECT delivery_id FROM demo.side_effects WHERE delivery_id = ANY(%s)", (list(sent),)).fetchall())
    assert prod == Counter({event_id: 1 for event_id in sent})


def test_export_arguments_are_checked(db_conn):
    for sql, state in [
        ("SELECT * FROM webhook_dedup.export_deliveries('github', now(), now() - interval '1 day')", "22023"),
        ("SELECT * FROM webhook_dedup.export_deliveries('github', NULL, now())", "22004"),
        ("SELECT * FROM webhook_dedup.export_deliveries('github', now() - interval '1 day', now(), max => 0)",
         "22023"),
        ("SELECT * FROM webhook_dedup.export_deliveries('github', now() - interval '1 day', now(),"
         " states => ARRAY['done'])", "22023"),
    ]:
        with pytest.raises(psycopg.Error) as e:
            db_conn.execute(sql)
        assert e.value.sqlstate == state, sql
