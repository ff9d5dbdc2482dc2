// webhook-dedup: the client of the webhook_dedup PostgreSQL extension for
// node-postgres. Every decision (verification, the idempotency key, the
// claim, the HTTP answer) is the database's; this package binds the calls
// safely and sends back what they return. README.md shows it per framework.

export { createPool, assertExactBytes, inTransaction } from './db';
export type { Queryable } from './db';
export { receive, httpAnswer, answerAfter, checkInstalled, prepareReceiver, RECEIVE_SIGNATURE } from './receive';
export type { Outcome, AfterWork, Json, Answer, HeaderMap, ReceiveOptions, Delivery } from './receive';
export {
  headersFromNode, headersFromFetch, rawBodyFromNode, rawBodyFromFetch, sendNode, toResponse, BodyTooLarge,
  MAX_BODY_BYTES, OUTCOME_HEADER,
} from './http';
export { withClaim, Worker, LeaseLost } from './claim';
export type { Claim, ClaimOutcome, WithClaimOptions, QueuedDelivery, WorkerOptions } from './claim';
export { outboxPut, OutboxSender } from './outbox';
export type { OutboxPutOptions, OutboxIntent, SendFailure, OutboxSenderOptions } from './outbox';
