-- webhook_receive of a signed 4 KiB GitHub delivery (a new X-GitHub-Delivery
-- id each time; GitHub signs the body only): verify, key, claim.
\set k random(1, 1000000000000)
SELECT outcome FROM webhook_receive('github', convert_to(:body, 'UTF8'),
    jsonb_build_object('X-GitHub-Event', CAST(:event AS text), 'X-GitHub-Delivery', CAST(:run || '-' || :k AS text),
                       'X-Hub-Signature-256', CAST(:signature AS text)),
    ARRAY[CAST(:secret AS text)]);
