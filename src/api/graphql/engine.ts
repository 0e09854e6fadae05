/**
 * The part of `/graphql` that needs graphql-js: parse, validate, the limits on depth and fields,
 * and execution. graphql-js costs about 5 MiB resident once loaded, so index.ts imports this file
 * on the first GraphQL request: a gateway nobody queries over GraphQL never carries it (issue 19).
 */
import type { ServerResponse } from 'node:http';
import {
  type DocumentNode,
  type FragmentDefinitionNode,
  GraphQLError,
  Kind,
  type SelectionSetNode,
  execute,
  parse,
  validate,
} from 'graphql';
import { ErrorCodes, isHayloftError } from '../../lib/errors.js';
import type { Gate } from '../../auth/gate.js';
import type { RouteKit } from '../routes.js';
import type { GraphqlOptions, GraphqlRequest, QueryLimits } from './types.js';
import { type GraphqlContext, ROOT } from './resolvers.js';
import { haystackSchema } from './schema.js';

const schema = haystackSchema();

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

/** Answers one GraphQL request (already read and authorised). */
export async function run(kit: RouteKit, res: ServerResponse, r: GraphqlRequest, gate: Gate, opts: GraphqlOptions, limits: QueryLimits): Promise<void> {
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
  const contextValue: GraphqlContext = { model: opts.model, history: opts.history, ...(opts.rollups === undefined ? {} : { rollups: opts.rollups }), clock: opts.clock, gate, limits, points: 0 };
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
