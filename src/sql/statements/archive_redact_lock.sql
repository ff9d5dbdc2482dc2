-- webhook_dedup.redact's first statement: the keys of its scope (as
-- archive_redact.sql: source $1; the key $2, the keys first seen before $3, or the
-- account field $4), locked. The erase is the next statement, whose newer
-- snapshot sees what a writer of those keys committed while this one
-- waited (a redrive's payload copy, which it erases too). Returns how many.
SELECT pg_catalog.count(*) AS locked
  FROM (SELECT FROM webhook_dedup.keys AS k
         WHERE k.source OPERATOR(pg_catalog.=) $1
           AND ($2::pg_catalog.text IS NULL OR k.idem_key OPERATOR(pg_catalog.=) $2)
           AND ($3::pg_catalog.timestamptz IS NULL OR k.first_seen_at OPERATOR(pg_catalog.<) $3)
           AND ($4::pg_catalog.text IS NULL
                OR (pg_catalog.split_part(k.idem_key, ':', 3) OPERATOR(pg_catalog.=) $4
                    AND pg_catalog.split_part(k.idem_key, ':', 4) OPERATOR(pg_catalog.<>) ''))
           FOR NO KEY UPDATE OF k) AS l
