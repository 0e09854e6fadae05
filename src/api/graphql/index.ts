/**
 * `POST /graphql` (and `GET /graphql?query=`): WideSky's GraphQL API over the model and the
 * history store, executed by graphql-js (introspection on). Authentication, impersonation and
 * permissions are REST's: the bearer token (and X-IMPERSONATE) give the principal, MODEL_READ is
 * needed to ask at all and decides what each search sees, HIS_READ what history it reads.
 *
 * Limits, each a clear GraphQL error rather than a stall: the query text (the body limit, and
 * `maxTokens` to the parser), the nesting depth (`maxDepth`), the number of fields once fragments
 * are expanded (`maxFields`: WideSky's client sends up to 2,000 aliased searches in one query,
 * some 14,000 fields), and the history data points of one answer (`maxPoints`).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { ErrorCodes, HayloftError } from '../../lib/errors.js';
import { hasBody, readBodyText } from '../body.js';
import type { RouteGroup, RouteKit } from '../routes.js';
import type * as Engine from './engine.js';
import type { GraphqlOptions, GraphqlRequest, QueryLimits } from './types.js';

export type { GraphqlOptions, GraphqlRequest, QueryLimits } from './types.js';

export const DEFAULT_QUERY_LIMITS: Readonly<QueryLimits> = Object.freeze({ maxDepth: 20, maxFields: 50_000, maxTokens: 250_000, maxPoints: 100_000 });

function bad(message: string): HayloftError {
  return new HayloftError(ErrorCodes.BAD_REQUEST, message);
}

async function requestOf(req: IncomingMessage, kit: RouteKit): Promise<GraphqlRequest> {
  if (req.method === 'GET' || req.method === 'HEAD') {
    const q = new URL(req.url ?? '/', 'http://x').searchParams;
    const query = q.get('query');
    if (query === null) throw bad('send the query as ?query=... or POST {"query": "..."}');
    const vars = q.get('variables');
    const op = q.get('operationName');
    return { query, ...(vars === null ? {} : { variables: parseVariables(vars) }), ...(op === null ? {} : { operationName: op }) };
  }
  if (!hasBody(req)) throw bad('POST a JSON object {"query": "...", "variables": {...}}');
  const type = (req.headers['content-type'] ?? 'application/json').split(';')[0]?.trim().toLowerCase();
  // Under the budget of bodies in flight, as the ops' bodies are: a burst of large queries waits
  // its turn (503) instead of growing the heap.
  const text = await readBodyText(req, kit.maxBodyBytes, { limitName: 'maxBodyBytes', budget: kit.budget });
  if (type === 'application/graphql') return { query: text };
  if (type !== 'application/json') throw new HayloftError(ErrorCodes.UNSUPPORTED_MEDIA_TYPE, `unsupported body type ${type}: send application/json`);
  let j: unknown;
  try {
    j = JSON.parse(text);
  } catch {
    throw bad('the body is not valid JSON');
  }
  if (typeof j !== 'object' || j === null || Array.isArray(j)) throw bad('the body must be a JSON object with "query"');
  const o = j as Record<string, unknown>;
  if (typeof o.query !== 'string') throw bad('"query" must be a string');
  const variables = typeof o.variables === 'string' ? parseVariables(o.variables) : o.variables;
  if (variables !== undefined && variables !== null && (typeof variables !== 'object' || Array.isArray(variables))) throw bad('"variables" must be an object');
  return {
    query: o.query,
    ...(variables === undefined || variables === null ? {} : { variables: variables as Record<string, unknown> }),
    ...(typeof o.operationName === 'string' ? { operationName: o.operationName } : {}),
  };
}

function parseVariables(text: string): Record<string, unknown> {
  try {
    const v = JSON.parse(text) as unknown;
    if (typeof v === 'object' && v !== null && !Array.isArray(v)) return v as Record<string, unknown>;
  } catch {
    // answered below
  }
  throw bad('"variables" must be a JSON object');
}

export function graphqlGroup(opts: GraphqlOptions): RouteGroup {
  const limits: QueryLimits = { ...DEFAULT_QUERY_LIMITS, ...(opts.limits ?? {}) };
  let engine: Promise<typeof Engine> | undefined;

  async function handle(kit: RouteKit, req: IncomingMessage, res: ServerResponse): Promise<void> {
    const gate = await kit.gate(req);
    gate.require('MODEL_READ', 'a GraphQL query');
    const r = await requestOf(req, kit);
    engine ??= import('./engine.js');
    await (await engine).run(kit, res, r, gate, opts, limits);
  }

  return {
    routes(kit) {
      kit.route('POST', '/graphql', (req, res) => handle(kit, req, res), 'graphql');
      kit.route('GET', '/graphql', (req, res) => handle(kit, req, res), 'graphql');
    },
  };
}
