-- Store a verification key. $1 source, $2 secret, $3 not_before,
-- $4 not_after, $5 note, $6 now, $7 the scheme it was accepted for (NULL:
-- none known). Returns its id.
INSERT INTO webhook_dedup.source_secrets (source, secret, not_before, not_after, created_at, note, scheme)
VALUES ($1, $2, $3, $4, $6, $5, $7)
RETURNING id
