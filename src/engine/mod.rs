//! The intake engine: the orchestration between the SQL surface
//! ([`crate::api`], which converts arguments, calls one function here and
//! builds its row) and the store ([`crate::store`], every read and write of
//! the tables). Each file is one stage or one path of a delivery:
//!
//! | file | what |
//! | --- | --- |
//! | [`receive`] | `webhook_receive`: one [`receive::Intake`] per delivery through verify, handshake, extract, key, wait, replay guard, claim or enqueue, archive |
//! | [`bound`] | the deadline every lock wait of a delivery ends by |
//! | [`replay`] | the replay guard's answer for a body seen under another key |
//! | [`claim`] | the claim and the completion of a key, with their counts |
//! | [`outbox`] | an intent written, due intents handed to senders, their transitions |
//! | [`queue`] | a delivery stored for the workers, and due keys handed to them |
//! | [`transitions`] | the holder's and the operator's transitions after a claim |
//! | [`archive`] | what the payload archive keeps of a delivery |
//!
//! The rules are the core's ([`crate::claim`], [`crate::profile`], ...):
//! the engine asks them and calls the store's transitions; it writes no
//! column and prepares no statement itself (`scripts/check-layers.sh`).

pub mod archive;
pub mod bound;
pub mod claim;
pub mod outbox;
pub mod queue;
pub mod receive;
pub mod replay;
pub mod transitions;

/// What a delivery says about its content ([`crate::claim::same_bytes`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct Content<'a> {
    /// SHA-256 under the source's fingerprint rule (None: a claim without
    /// a payload).
    pub fingerprint: Option<&'a [u8]>,
    /// SHA-256 of the raw bytes, when the rule covers less.
    pub raw: Option<&'a [u8]>,
}

impl<'a> Content<'a> {
    /// The fingerprint to compare with a key's `stored` one: the stored
    /// one itself when it is of these raw bytes (a key stored under
    /// another rule still knows its own bytes), else this delivery's.
    pub fn given<'s>(&self, stored: Option<&'s [u8]>) -> Option<&'s [u8]>
    where
        'a: 's,
    {
        crate::claim::same_bytes(stored, self.fingerprint, self.raw)
    }
}
