-- Whether a key exists (read without a lock): a key redrive_lock_key.sql
-- did not return is held right now when it does. $1 source, $2 idem_key.
SELECT EXISTS (SELECT FROM webhook_dedup.keys AS k
                WHERE k.idem_key OPERATOR(pg_catalog.=) $2 AND k.source OPERATOR(pg_catalog.=) $1) AS present
