-- Signature verification (src/api/verify.rs): webhook_verify,
-- webhook_verify_detail and the typed conveniences, over _verify
-- (editions/sql/internal/signature.sql). So far the schemes github,
-- shopify, stripe, paddle and calendly; the others answer 0A000 naming the
-- native edition.

--@ webhook_dedup.webhook_verify_detail
DECLARE
  folded jsonb;
BEGIN
  IF secrets IS NULL THEN
    RAISE EXCEPTION 'secrets must not be NULL' USING ERRCODE = 'null_value_not_allowed';
  END IF;
  folded := webhook_dedup._headers(headers);
  RETURN QUERY SELECT v.valid, v.reason, v.secret_index, v.signed_at
                 FROM webhook_dedup._verify(scheme, payload, folded, secrets, tolerance, at, url, method,
                                            signature_header, signature_prefix, algorithm, encoding) AS v;
END

--@ webhook_dedup.webhook_verify
DECLARE
  folded jsonb;
BEGIN
  IF secrets IS NULL THEN
    RAISE EXCEPTION 'secrets must not be NULL' USING ERRCODE = 'null_value_not_allowed';
  END IF;
  folded := webhook_dedup._headers(headers);
  RETURN (webhook_dedup._verify(scheme, payload, folded, secrets, tolerance, at, url, method,
                                signature_header, signature_prefix, algorithm, encoding)).valid;
END

--@ webhook_dedup.webhook_verify_github
BEGIN
  IF secret IS NULL THEN
    RAISE EXCEPTION 'secret must not be NULL' USING ERRCODE = 'null_value_not_allowed';
  END IF;
  RETURN (webhook_dedup._verify('github', payload,
                                CASE WHEN signature_header IS NULL THEN '{}'::jsonb
                                     ELSE pg_catalog.jsonb_build_object('x-hub-signature-256',
                                                                        pg_catalog.jsonb_build_array(signature_header)) END,
                                ARRAY[secret], NULL, 'epoch', NULL, NULL, NULL, NULL, NULL, NULL)).valid;
END

--@ webhook_dedup.webhook_verify_shopify
BEGIN
  IF secret IS NULL THEN
    RAISE EXCEPTION 'secret must not be NULL' USING ERRCODE = 'null_value_not_allowed';
  END IF;
  RETURN (webhook_dedup._verify('shopify', payload,
                                CASE WHEN hmac_header IS NULL THEN '{}'::jsonb
                                     ELSE pg_catalog.jsonb_build_object('x-shopify-hmac-sha256',
                                                                        pg_catalog.jsonb_build_array(hmac_header)) END,
                                ARRAY[secret], NULL, 'epoch', NULL, NULL, NULL, NULL, NULL, NULL)).valid;
END

--@ webhook_dedup.webhook_verify_stripe
BEGIN
  IF secret IS NULL THEN
    RAISE EXCEPTION 'secret must not be NULL' USING ERRCODE = 'null_value_not_allowed';
  END IF;
  RETURN (webhook_dedup._verify('stripe', payload,
                                CASE WHEN signature_header IS NULL THEN '{}'::jsonb
                                     ELSE pg_catalog.jsonb_build_object('stripe-signature',
                                                                        pg_catalog.jsonb_build_array(signature_header)) END,
                                ARRAY[secret], tolerance, at, NULL, NULL, NULL, NULL, NULL, NULL)).valid;
END

--@ webhook_dedup.webhook_verify_paddle
BEGIN
  IF secret IS NULL THEN
    RAISE EXCEPTION 'secret must not be NULL' USING ERRCODE = 'null_value_not_allowed';
  END IF;
  RETURN (webhook_dedup._verify('paddle', payload,
                                CASE WHEN signature_header IS NULL THEN '{}'::jsonb
                                     ELSE pg_catalog.jsonb_build_object('paddle-signature',
                                                                        pg_catalog.jsonb_build_array(signature_header)) END,
                                ARRAY[secret], tolerance, at, NULL, NULL, NULL, NULL, NULL, NULL)).valid;
END
