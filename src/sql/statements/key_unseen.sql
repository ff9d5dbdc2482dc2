-- webhook_dedup.unseen (src/api/reconcile.rs): of the provider's event ids
-- $2 and their keys $3 (derived by crates/webhook-dedup-core/src/key.rs as webhook_receive derives
-- them, in the same order), the ids whose key source $1 does not have, in
-- the order given, each once. One primary-key probe per id.
SELECT u.event_id
  FROM ROWS FROM (pg_catalog.unnest($2::pg_catalog.text[]), pg_catalog.unnest($3::pg_catalog.text[]))
       WITH ORDINALITY AS u(event_id, idem_key, n)
 WHERE NOT EXISTS (SELECT FROM webhook_dedup.keys AS k
                    WHERE k.idem_key OPERATOR(pg_catalog.=) u.idem_key COLLATE "C"
                      AND k.source OPERATOR(pg_catalog.=) $1)
 ORDER BY u.n
