// The HTTP side, for Node's http (Express) and for the Fetch API (Next.js
// route handlers, Hono): the raw body, every header, and the answer sent
// exactly as the database computed it.

import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Answer, HeaderMap } from './receive';

/** GitHub's limit on a delivery's payload, 25 MB: the default cap on a body
 * read here (a larger one is refused with 413 before it is read whole). */
export const MAX_BODY_BYTES = 25 * 1024 * 1024;

/** Thrown when a body is larger than the limit; `status` is 413. */
export class BodyTooLarge extends Error {
  readonly status = 413;
  constructor(limit: number) {
    super(`request body over ${limit} bytes`);
  }
}

/**
 * Every header of a Node request (Express's `req` too), names lower-cased,
 * a header sent more than once as the list of its values
 * (`headersDistinct`, Node 18.3 and later; `req.headers` would join them
 * with ", ", which is not what was signed).
 */
export function headersFromNode(req: IncomingMessage): HeaderMap {
  return Object.fromEntries(Object.entries(req.headersDistinct)
    .filter((entry): entry is [string, string[]] => entry[1] !== undefined)
    .map(([name, values]) => [name, values.length === 1 ? values[0] : values]));
}

/**
 * Every header of a Fetch API request (`Request.headers`: Next.js route
 * handlers, Hono's `c.req.raw`). The Fetch API itself joins a repeated
 * header's values with ", " (set-cookie aside), so a header sent twice
 * reaches webhook_receive joined; the providers' signature headers are
 * sent once.
 */
export function headersFromFetch(headers: Headers): HeaderMap {
  const out: HeaderMap = {};
  headers.forEach((value, name) => { out[name] = value; });
  return out;
}

/**
 * The raw body of a Node request (`http.IncomingMessage`, Express's `req`),
 * at most `limit` bytes (BodyTooLarge otherwise). When `express.raw` read
 * it, its Buffer (`req.body`) is returned; a stream nobody read yet (no
 * parser, or one whose type did not match) is read here; a body another
 * parser consumed (an object from `express.json()`, even `{}`) is refused
 * with a TypeError: the signature is over the bytes, which JSON.stringify
 * does not give back.
 */
export async function rawBodyFromNode(req: IncomingMessage & { body?: unknown },
    limit: number = MAX_BODY_BYTES): Promise<Buffer> {
  if (Buffer.isBuffer(req.body)) return req.body;
  if (req.body !== undefined && req.readableEnded) {
    // a body parser read the stream and left something else than the bytes
    throw new TypeError('webhook-dedup: the request body was parsed before the webhook route; the signature '
      + 'is over the raw bytes: put express.raw({ type: \'*/*\' }) (or nothing) in front of it, not express.json()');
  }
  // not read yet (no parser, or one whose type did not match): read it here
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += chunk.length;
    if (size > limit) throw new BodyTooLarge(limit);
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks);
}

/** The raw body of a Fetch API request, at most `limit` bytes: a
 * Content-Length over it is refused before reading, and a body sent without
 * one (chunked) is read chunk by chunk and cancelled as soon as it passes
 * the limit (BodyTooLarge), never held whole. */
export async function rawBodyFromFetch(request: Request, limit: number = MAX_BODY_BYTES): Promise<Buffer> {
  const declared = Number(request.headers.get('content-length'));
  if (Number.isFinite(declared) && declared > limit) throw new BodyTooLarge(limit);
  if (request.body === null) return Buffer.alloc(0);
  const reader = request.body.getReader();
  const chunks: Buffer[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > limit) {
      await reader.cancel().catch(() => {});
      throw new BodyTooLarge(limit);
    }
    chunks.push(Buffer.from(value.buffer, value.byteOffset, value.byteLength));
  }
  return Buffer.concat(chunks, size);
}

function encode(answer: Answer): Buffer {
  return Buffer.from(JSON.stringify(answer.body));
}

/** The name of the header that names the delivery's outcome. */
export const OUTCOME_HEADER = 'X-Webhook-Outcome';

/** `answer`'s headers, with X-Webhook-Outcome when it has an outcome. */
function headersOf(answer: Answer): Record<string, string> {
  return answer.outcome ? { ...answer.headers, [OUTCOME_HEADER]: answer.outcome } : answer.headers;
}

/**
 * Sends `answer` on a Node response (Express's `res` too): exactly its
 * status and headers (no charset added to its Content-Type, as Express's
 * `res.json` would), `X-Webhook-Outcome: <outcome>` when the answer has an
 * outcome (`receive`'s answers, `answerAfter`'s), and its body as JSON,
 * with Content-Length.
 */
export function sendNode(res: ServerResponse, answer: Answer): void {
  const data = encode(answer);
  for (const [name, value] of Object.entries(headersOf(answer))) res.setHeader(name, value);
  res.setHeader('Content-Length', data.length);
  res.statusCode = answer.status;
  res.end(data);
}

/** `answer` as a Fetch API Response (return it from a Next.js route handler
 * or a Hono handler): its status, its headers (with X-Webhook-Outcome as
 * `sendNode`'s), its body as JSON. */
export function toResponse(answer: Answer): Response {
  return new Response(JSON.stringify(answer.body), { status: answer.status, headers: headersOf(answer) });
}
