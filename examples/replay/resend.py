#!/usr/bin/env python3
"""Replay captured production deliveries into staging.

The guides' test of a receiver: take real events as the provider sent them,
send them to a staging receiver the four ways a provider can (once, twice
in a row, two copies at the same instant, out of order), and look for a
business handler that ran twice. This command reads an export of
webhook_dedup's payload archive (webhook_dedup.export_deliveries, format
webhook_dedup.delivery/1, one JSON document per line), re-signs each body
with the staging secret of its scheme and POSTs it, then prints what the
receiver answered.

    psql -At -c "SELECT delivery FROM webhook_dedup.export_deliveries('github',
                 now() - interval '1 day', now())" > deliveries.jsonl
    python3 resend.py deliveries.jsonl --url http://127.0.0.1:8080/webhooks/github \\
        --secret "$STAGING_GITHUB_SECRET" --dsn "dbname=staging" --copies 2 --concurrent --shuffle 7

- The body is sent byte for byte as archived; the headers as archived,
  except those the signature is made of (replaced by the new signature's)
  and the connection's own (Host, Content-Length, ...).
- The signature is made by the database (webhook_dedup.webhook_sign, the
  same code that verifies it), for the delivery's scheme (the export's
  `scheme`, or --scheme), with the delivery's event id as the message id
  where the scheme signs one (Standard Webhooks' webhook-id) and --url
  where it signs the URL (Twilio, Square, HubSpot). --dsn names any
  database with the extension (signing changes nothing there). Mailgun
  deliveries, whose signature is inside the body, are refused.
- --copies N sends each delivery N times (one after the other, or all at
  the same instant with --concurrent); --shuffle SEED sends the deliveries
  out of order (a seeded shuffle, so a run can be repeated).

Prints one line per answer (the delivery, the copy, the HTTP status, the
X-Webhook-Outcome header when the receiver sends one, the body) and a
summary; exits non-zero when a copy got no 2xx.
"""

import argparse
import base64
import json
import random
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import psycopg

from replay import post  # one POST on a new connection, as the demo's provider sends

FORMAT = "webhook_dedup.delivery/1"
# The schemes whose signature covers the request URL: webhook_sign takes
# url for these only (22023 for the others; docs/signatures.md).
SIGNS_URL = {"twilio", "square", "hubspot"}
# Mailgun signs a token and a time carried inside the body: a new
# signature would change the bytes, which a replay must not.
SIGNED_IN_BODY = {"mailgun"}
# A connection's own headers: http.client writes Host and Content-Length
# for the request it makes; the rest describe the capturing hop.
HOP_HEADERS = {"host", "content-length", "connection", "keep-alive", "transfer-encoding", "te", "trailer",
               "upgrade", "expect", "proxy-authorization", "proxy-connection", "accept-encoding"}


@dataclass(frozen=True)
class Delivery:
    scheme: str
    idem_key: str
    event_id: str | None
    body: bytes
    headers: dict


def read_export(lines, scheme_override: str | None = None) -> list[Delivery]:
    """The deliveries of an export (JSON Lines of webhook_dedup.delivery/1)."""
    out = []
    for n, line in enumerate(lines, 1):
        line = line.strip()
        if not line:
            continue
        doc = json.loads(line)
        if doc.get("format") != FORMAT:
            raise SystemExit(f"line {n}: not a {FORMAT} document (format {doc.get('format')!r})")
        out.append(Delivery(scheme_override or doc["scheme"], doc["idem_key"], doc.get("event_id"),
                            base64.b64decode(doc["body_base64"], validate=True), doc.get("headers") or {}))
    return out


def resigned(conn, d: Delivery, secret: str, url: str) -> dict:
    """The delivery's headers with its signature made anew with `secret`
    by webhook_dedup.webhook_sign (now, for schemes that sign a time)."""
    if d.scheme in SIGNED_IN_BODY:
        raise SystemExit(f"{d.idem_key}: a {d.scheme} delivery carries its signature in its body;"
                         " it cannot be re-signed without changing its bytes")
    signature = conn.execute(
        "SELECT webhook_dedup.webhook_sign(%s, %s, %s, msg_id => %s, url => %s)",
        (d.scheme, d.body, secret, d.event_id or d.idem_key, url if d.scheme in SIGNS_URL else None)).fetchone()[0]
    replaced = {name.lower() for name in signature} | HOP_HEADERS
    headers = {k: v for k, v in d.headers.items() if k.lower() not in replaced}
    headers.update(signature)
    return headers


@dataclass
class Answer:
    delivery: int
    copy: int
    status: int
    outcome: str | None
    body: bytes


def send(deliveries: list[Delivery], url: str, secret: str, dsn: str, copies: int = 1, concurrent: bool = False,
         shuffle: int | None = None) -> list[Answer]:
    order = list(range(len(deliveries)))
    if shuffle is not None:
        random.Random(shuffle).shuffle(order)
    answers = []
    with psycopg.connect(dsn, autocommit=True) as conn:
        for i in order:
            d = deliveries[i]
            headers = resigned(conn, d, secret, url)
            if concurrent and copies > 1:
                barrier = threading.Barrier(copies)
                with ThreadPoolExecutor(copies) as pool:
                    got = list(pool.map(lambda _: post(url, d.body, headers, barrier), range(copies)))
            else:
                got = [post(url, d.body, headers) for _ in range(copies)]
            answers += [Answer(i, c, g.status or 0, g.outcome, g.body) for c, g in enumerate(got, 1)]
    return answers


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("export", help="the export: JSON Lines of webhook_dedup.delivery/1 ('-': standard input)")
    p.add_argument("--url", required=True, help="the staging receiver's webhook URL")
    p.add_argument("--secret", required=True, help="the staging secret of the deliveries' scheme")
    p.add_argument("--dsn", default="", help="a database with webhook_dedup, for webhook_sign (default: libpq env)")
    p.add_argument("--scheme", help="sign as this scheme instead of the export's")
    p.add_argument("--copies", type=int, default=1, help="send each delivery this many times (default 1)")
    p.add_argument("--concurrent", action="store_true", help="send the copies of a delivery at the same instant")
    p.add_argument("--shuffle", type=int, metavar="SEED", help="send the deliveries out of order (seeded)")
    args = p.parse_args(argv)
    if args.copies < 1:
        p.error("--copies must be at least 1")
    source = sys.stdin if args.export == "-" else open(args.export, encoding="utf-8")
    with source:
        deliveries = read_export(source, args.scheme)
    answers = send(deliveries, args.url, args.secret, args.dsn, args.copies, args.concurrent, args.shuffle)
    for a in answers:
        d = deliveries[a.delivery]
        print(json.dumps({"idem_key": d.idem_key, "copy": a.copy, "status": a.status, "outcome": a.outcome,
                          "body": a.body.decode("utf-8", "replace")}))
    failed = [a for a in answers if not 200 <= a.status < 300]
    print(f"{len(deliveries)} deliveries, {len(answers)} sent, {len(answers) - len(failed)} answered 2xx, "
          f"{len(failed)} not", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
