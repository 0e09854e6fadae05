/** The shapes shared by the `/graphql` route (index.ts) and its engine (engine.ts). */
import type { Clock } from '../../lib/clock.js';
import type { Model } from '../../model/model.js';
import type { HistoryStore } from '../../store/history.js';
import type { RollupStore } from '../../store/rollups.js';
import type { GraphqlLimits } from './resolvers.js';

export interface QueryLimits extends GraphqlLimits {
  /** Nesting of selections (introspection's own query goes 13 deep). */
  maxDepth: number;
  /** Fields of a query with its fragments expanded. */
  maxFields: number;
  /** Tokens the parser reads before it gives up. */
  maxTokens: number;
}

export interface GraphqlOptions {
  model: Model;
  history: HistoryStore;
  /** Rollups of history past retention, read by aggregates (store/rollups.ts). */
  rollups?: RollupStore;
  clock: Clock;
  limits?: Partial<QueryLimits>;
}

/** One GraphQL request as read from GET's query or POST's body. */
export interface GraphqlRequest {
  query: string;
  variables?: Record<string, unknown>;
  operationName?: string;
}
