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
import {
  type DocumentNode,
  type FragmentDefinitionNode,
  GraphQLError,
  type GraphQLSchema,
  Kind,
  type SelectionSetNode,
  execute,
  parse,
  validate,
} from 'graphql';
import { ErrorCodes, HayloftError, isHayloftError } from '../../lib/errors.js';
import type { Clock } from '../../lib/clock.js';
import type { Model } from '../../model/model.js';
import type { HistoryStore } from '../../store/history.js';
import { hasBody, readBodyText } from '../body.js';
import type { RouteGroup, RouteKit } from '../routes.js';
import { type GraphqlContext, type GraphqlLimits, ROOT } from './resolvers.js';
import { haystackSchema } from './schema.js';

export interface QueryLimits extends GraphqlLimits {
  /** Nesting of selections (introspection's own query goes 13 deep). */
  maxDepth: number;
  /** Fields of a query with its fragments expanded. */
  maxFields: number;
  /** Tokens the parser reads before it gives up. */
  maxTokens: number;
}

export const DEFAULT_QUERY_LIMITS: Readonly<QueryLimits> = Object.freeze({ maxDepth: 20, maxFields: 50_000, maxTokens: 250_000, maxPoints: 100_000 });

export interface GraphqlOptions {
  model: Model;
  history: HistoryStore;
  clock: Clock;
  limits?: Partial<QueryLimits>;
}

interface Request {
  query: string;
  variables?: Record<string, unknown>;
  operationName?: string;
}

function bad(message: string): HayloftError {
  return new HayloftError(ErrorCodes.BAD_REQUEST, message);
}

async function requestOf(req: IncomingMessage, kit: RouteKit): Promise<Request> {
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

/**
 * Depth and expanded field count of each operation, fragments counted where they are spread
 * (memoised, so fragments spread inside fragments cost no exponential walk). Run after the
 * specified rules, which refuse fragment cycles and unknown fragments.
 */
export function measure(doc: DocumentNode): { depth: number; fields: number } {
  const fragments = new Map<string, FragmentDefinitionNode>();
  for (const d of doc.definitions) if (d.kind === Kind.FRAGMENT_DEFINITION) fragments.set(d.name.value, d);
  const memo = new Map<string, { depth: number; fields: number }>();
  function walk(set: SelectionSetNode): { depth: number; fields: number } {
    let depth = 0;
    let fields = 0;
    for (const s of set.selections) {
      let m: { depth: number; fields: number };
      if (s.kind === Kind.FIELD) {
        const inner = s.selectionSet === undefined ? { depth: 0, fields: 0 } : walk(s.selectionSet);
        m = { depth: inner.depth + 1, fields: inner.fields + 1 };
      } else if (s.kind === Kind.INLINE_FRAGMENT) {
        m = walk(s.selectionSet);
      } else {
        const name = s.name.value;
        let f = memo.get(name);
        if (f === undefined) {
          const def = fragments.get(name);
          f = def === undefined ? { depth: 0, fields: 0 } : walk(def.selectionSet);
          memo.set(name, f);
        }
        m = f;
      }
      depth = Math.max(depth, m.depth);
      fields += m.fields;
    }
    return { depth, fields };
  }
  let depth = 0;
  let fields = 0;
  for (const d of doc.definitions) {
    if (d.kind !== Kind.OPERATION_DEFINITION) continue;
    const m = walk(d.selectionSet);
    depth = Math.max(depth, m.depth);
    fields = Math.max(fields, m.fields);
  }
  return { depth, fields };
}

function limitError(message: string): GraphQLError {
  return new GraphQLError(message, { extensions: { errCode: ErrorCodes.GRAPHQL_LIMIT } });
}

/** A GraphQL error as answered: the HL_ code of a Hayloft error in `extensions.errCode`. */
function formatted(e: GraphQLError): Record<string, unknown> {
  const orig = e.originalError;
  const out = e.toJSON() as unknown as Record<string, unknown>;
  if (orig !== undefined && orig !== null && isHayloftError(orig)) out.extensions = { ...(e.extensions ?? {}), errCode: orig.code };
  else if (orig !== undefined && orig !== null && !(orig instanceof GraphQLError)) {
    // Not a coded error: an internal failure, not the client's; its text may say too much.
    out.message = 'internal error';
    out.extensions = { errCode: ErrorCodes.INTERNAL };
  } else if (e.extensions?.errCode === undefined) out.extensions = { ...(e.extensions ?? {}), errCode: ErrorCodes.BAD_REQUEST };
  return out;
}

export function graphqlGroup(opts: GraphqlOptions): RouteGroup {
  const limits: QueryLimits = { ...DEFAULT_QUERY_LIMITS, ...(opts.limits ?? {}) };
  let schema: GraphQLSchema | undefined;

  async function handle(kit: RouteKit, req: IncomingMessage, res: ServerResponse): Promise<void> {
    const principal = kit.auth === null ? null : await kit.auth.principal(req);
    if (principal !== null && !principal.grants.has('MODEL_READ')) throw new HayloftError(ErrorCodes.FORBIDDEN, 'permission denied: GraphQL queries need MODEL_READ');
    const r = await requestOf(req, kit);
    schema ??= haystackSchema();
    let doc: DocumentNode;
    try {
      doc = parse(r.query, { maxTokens: limits.maxTokens });
    } catch (e) {
      const err = e instanceof GraphQLError ? e : new GraphQLError(String(e));
      kit.respond.sendJson(res, 400, { errors: [formatted(err)] });
      return;
    }
    const invalid = validate(schema, doc);
    if (invalid.length > 0) {
      kit.respond.sendJson(res, 400, { errors: invalid.map(formatted) });
      return;
    }
    const m = measure(doc);
    const over: GraphQLError[] = [];
    if (m.depth > limits.maxDepth) over.push(limitError(`the query nests ${m.depth} levels deep; at most ${limits.maxDepth} are allowed`));
    if (m.fields > limits.maxFields) over.push(limitError(`the query asks for ${m.fields} fields (fragments expanded); at most ${limits.maxFields} are allowed: split it`));
    if (over.length > 0) {
      kit.respond.sendJson(res, 400, { errors: over.map(formatted) });
      return;
    }
    const contextValue: GraphqlContext = { model: opts.model, history: opts.history, clock: opts.clock, principal, limits, points: 0 };
    const result = await execute({
      schema,
      document: doc,
      rootValue: ROOT,
      contextValue,
      ...(r.variables === undefined ? {} : { variableValues: r.variables }),
      ...(r.operationName === undefined ? {} : { operationName: r.operationName }),
    });
    const body: Record<string, unknown> = { data: result.data ?? null };
    if (result.errors !== undefined && result.errors.length > 0) {
      body.errors = result.errors.map(formatted);
      for (const e of result.errors) {
        const o = e.originalError;
        if (o !== undefined && o !== null && !isHayloftError(o) && !(o instanceof GraphQLError)) kit.log.error({ err: o, path: e.path }, 'unexpected error in a GraphQL resolver');
      }
    }
    kit.respond.sendJson(res, 200, body);
  }

  return {
    routes(kit) {
      kit.route('POST', '/graphql', (req, res) => handle(kit, req, res), 'graphql');
      kit.route('GET', '/graphql', (req, res) => handle(kit, req, res), 'graphql');
    },
  };
}
