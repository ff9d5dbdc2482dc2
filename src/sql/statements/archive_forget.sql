-- webhook_forget's second statement (single server): the forgotten key's
-- archived deliveries go with it, the first at its first_seen_at and each
-- conflicting one at its conflict_log.seen_at, so that no archived
-- delivery is left of the key (a later key of the same id is another).
-- $1 source, $2 idem_key, $3 the key's first_seen_at.
DELETE FROM webhook_dedup.archive AS a
 USING (SELECT $3::pg_catalog.timestamptz AS at
        UNION
        SELECT c.seen_at FROM webhook_dedup.conflict_log AS c
         WHERE c.idem_key OPERATOR(pg_catalog.=) $2 AND c.source OPERATOR(pg_catalog.=) $1) AS arrivals
 WHERE a.source OPERATOR(pg_catalog.=) $1 AND a.received_at OPERATOR(pg_catalog.=) arrivals.at
   AND a.idem_key OPERATOR(pg_catalog.=) $2
