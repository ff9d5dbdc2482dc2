-- Count a batch of run $1 ($2 moved, $3 skipped); the run is done once no
-- key is left to do. $4 now.
UPDATE webhook_dedup.redrives AS r
   SET moved = r.moved OPERATOR(pg_catalog.+) $2, skipped = r.skipped OPERATOR(pg_catalog.+) $3,
       status = CASE WHEN EXISTS (SELECT FROM webhook_dedup.redrive_keys AS i
                                   WHERE i.run OPERATOR(pg_catalog.=) $1 AND i.outcome IS NULL)
                     THEN r.status ELSE 'done' END,
       finished_at = CASE WHEN EXISTS (SELECT FROM webhook_dedup.redrive_keys AS i
                                        WHERE i.run OPERATOR(pg_catalog.=) $1 AND i.outcome IS NULL)
                          THEN r.finished_at ELSE $4 END
 WHERE r.id OPERATOR(pg_catalog.=) $1
