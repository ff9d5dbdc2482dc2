//! Reconciliation (docs/operations.md "Reconciling with the
//! provider"): the nightly job lists what the provider sent (Stripe's list
//! of events, GitHub's list of deliveries, ...) and asks which of those
//! events never reached this database (`unseen`). The keys are kept for the
//! whole retry window, payload or not, so the answer is one primary-key
//! probe per id, derived exactly as `webhook_receive` derives the key. The
//! job then fetches each missed event from the provider's API and hands it
//! to `reconcile`, which enqueues it for the workers through the enqueue
//! path (`webhook_enqueue`'s), marked as reconciled on the key and counted
//! apart in the metrics (`reconciled`: a leaky endpoint).

#[pgrx::pg_schema]
mod webhook_dedup {
    use crate::error::{required, Error, OrRaise, Raise};
    use crate::key::{derive, Parts};
    use crate::profile::{Body, Fingerprint, Rules};
    use crate::signature::Scheme;
    use crate::spi;
    use pgrx::datum::Array;
    use pgrx::prelude::*;
    use std::collections::HashSet;

    /// Enqueue an event a reconciliation job fetched from the provider's
    /// API because it never arrived (`unseen`): stored as
    /// `webhook_enqueue` stores a delivery (pending, with `payload` and
    /// `headers`, archived when the source keeps payloads), under the key
    /// `webhook_receive` would have derived from `event_id` (with the same
    /// `environment`, `account` and `operation`), and marked
    /// `reconciled_at` on the key. The source's rules apply as in
    /// `webhook_receive` (its provider's, or its name's, profile and its
    /// `webhook_dedup.sources` intake): an event type it does not accept is
    /// `ignored` (nothing stored), and the fingerprint covers what its rule
    /// covers, so the provider's own later retry is a duplicate. Returns
    /// `accepted` (counted as `reconciled`, not as a delivery), `ignored`,
    /// or `duplicate` / `conflict` when the key exists by then (it arrived
    /// meanwhile: counted on the key as a delivery of it, nothing else
    /// stored). For receivers (the job enqueues as a receiver does). Errors: 22004 NULL source, event_id or
    /// payload; 22023 a bad source, an empty id or part.
    #[pg_extern(volatile, parallel_unsafe)]
    #[allow(clippy::too_many_arguments)]
    fn reconcile(
        source: Option<&str>,
        event_id: Option<&str>,
        payload: Option<&[u8]>,
        event_type: default!(Option<&str>, "NULL"),
        headers: default!(Option<crate::jsonb::Jsonb>, "NULL"),
        environment: default!(Option<&str>, "NULL"),
        account: default!(Option<&str>, "NULL"),
        operation: default!(Option<&str>, "NULL"),
    ) -> String {
        let source = required(source, "source");
        crate::key::check_source(source).or_raise();
        let event_id = required(event_id, "event_id");
        let payload = required(payload, "payload");
        let parts = Parts { source, event_id, environment, account, operation, body_hash: false };
        let idem_key = derive(&parts).or_raise();
        let key = crate::store::Key { source, idem_key: &idem_key };
        spi::connected(|conn| {
            // the source's own rules, as webhook_receive applies them: the
            // event types it accepts, and what its fingerprint covers (so
            // that the provider's own retry of the event, later, is its
            // duplicate and not a conflict)
            let settings = crate::store::sources::settings(conn, source);
            let intake = settings.intake();
            if intake.is_some_and(|i| !i.accepts(event_type)) {
                return "ignored".to_string();
            }
            let scheme = Scheme::parse(settings.provider.as_deref().unwrap_or(source)).ok();
            let fingerprint = match scheme {
                Some(scheme) => {
                    let rules = match intake {
                        Some(intake) => intake.apply(Rules::of(scheme), scheme),
                        None => Rules::of(scheme),
                    };
                    rules.fingerprint.fingerprint_signed(&Body::new(payload), None)
                }
                None => Fingerprint::raw(payload),
            };
            let raw = (!fingerprint.is_raw()).then(|| Fingerprint::raw(payload));
            let origin = crate::engine::queue::Origin { event_id: Some(event_id), headers, reconciled: true };
            let content = crate::engine::Content {
                fingerprint: Some(fingerprint.as_bytes()),
                raw: raw.as_ref().map(Fingerprint::as_bytes),
            };
            let enqueue =
                crate::engine::queue::Enqueue { key, payload, content, event_type, headers, origin: Some(origin) };
            let outcome = crate::engine::queue::enqueue(conn, &enqueue);
            outcome.as_str().to_string()
        })
    }

    /// The most ids one call takes: a day of a busy source, listed by a
    /// provider's API in pages, fits; a longer list goes in several calls.
    const MAX_IDS: usize = 100_000;

    /// Of the provider's `event_ids` (as its API lists them), those that
    /// `source` has no key for: events that never reached this database
    /// (or whose key is past retention). Keys are derived as
    /// `webhook_receive` derives them, with the same `environment`,
    /// `account` and `operation` (NULL: none), so pass what the receiver
    /// passes. In the order given, each once. An event of a type the source
    /// does not accept (`accept_event_types`) never has a key: it is listed
    /// too (`reconcile` answers it `ignored`). Feed what it returns back
    /// through `reconcile` (the event fetched from the provider's API), so
    /// that the workers process it. For readers (it writes
    /// nothing). Errors: 22004 NULL source or event_ids, or a NULL id;
    /// 22023 a bad source, an empty id or part, more than 100,000 ids.
    #[pg_extern(stable, parallel_safe)]
    fn unseen(
        source: Option<&str>,
        event_ids: Option<Array<'_, &str>>,
        environment: default!(Option<&str>, "NULL"),
        account: default!(Option<&str>, "NULL"),
        operation: default!(Option<&str>, "NULL"),
    ) -> SetOfIterator<'static, String> {
        let source = required(source, "source");
        crate::key::check_source(source).or_raise();
        let event_ids = required(event_ids, "event_ids");
        if event_ids.len() > MAX_IDS {
            Error::invalid(format!("event_ids has {} entries; the limit is {MAX_IDS}", event_ids.len())).raise();
        }
        let mut seen = HashSet::new();
        let (mut ids, mut keys) = (Vec::new(), Vec::new());
        for id in event_ids.iter() {
            let id = required(id, "an element of event_ids");
            if !seen.insert(id) {
                continue;
            }
            let parts = Parts { source, event_id: id, environment, account, operation, body_hash: false };
            keys.push(derive(&parts).or_raise());
            ids.push(id.to_owned());
        }
        let unseen = spi::connected(|conn| crate::store::unseen(conn, source, ids, keys));
        SetOfIterator::new(unseen)
    }
}
