// GET /healthz: 200 once the receiver serves.
export function GET() {
  return Response.json({ status: 'ok' });
}
