// The published WideSky client ships no types; these cover what the interop tests call.
declare module '@widesky/jswidesky-client' {
  interface Grid {
    meta: Record<string, unknown>;
    cols: { name: string }[];
    rows: Record<string, unknown>[];
  }
  interface Token {
    access_token: string;
    refresh_token: string;
    expires_in: number;
    token_type: string;
  }
  export class WideSkyClient {
    constructor(baseUri: string, username: string, password: string, clientId: string, clientSecret: string, logger?: unknown, accessToken?: Token, options?: unknown);
    _ws_token: Token | null;
    login(): Promise<Token>;
    getToken(): Promise<Token>;
    read(ids: string | string[]): Promise<Grid>;
    find(filter: string, limit?: number): Promise<Grid>;
    create(entities: Record<string, unknown> | Record<string, unknown>[]): Promise<Grid>;
    update(entities: Record<string, unknown> | Record<string, unknown>[]): Promise<Grid>;
    deleteById(ids: string | string[]): Promise<Grid>;
    deleteByFilter(filter: string, limit?: number): Promise<Grid>;
    updatePassword(newPassword: string): Promise<unknown>;
    watchSub(pointIds: string | string[], lease: string, description: string): Promise<Grid>;
    watchExtend(watchId: string, pointIds: string | string[], lease?: string): Promise<Grid>;
    watchUnsub(watchId: string, deletePointIds?: string | string[], close?: boolean): Promise<Grid>;
    submitRequest(method: string, uri: string, body?: unknown, config?: unknown): Promise<Grid>;
    hisWrite(records: Record<string, Record<string, unknown>>): Promise<Grid>;
    hisRead(ids: string | string[], from: string | Date, to?: Date, batchSize?: number): Promise<Grid>;
    hisDelete(ids: string | string[], range: string): Promise<Grid>;
    batch: {
      hisWrite(data: HisWritePayload | Record<string, Record<string, unknown>>, options?: unknown): Promise<BatchResult<Grid>>;
      hisRead(ids: string[], from: string | Date, to?: Date, options?: unknown): Promise<BatchResult<{ ts: string; val: unknown }[]>>;
      hisDelete(ids: string[], timeStart: Date, timeEnd: Date, options?: unknown): Promise<BatchResult<Grid>>;
      multiFind(filterAndLimits: [string, number?][] | (string | number)[][], options?: unknown): Promise<BatchResult<Record<string, unknown>[]>>;
    };
    query(graphql: string, metadata?: unknown): Promise<{ data?: Record<string, unknown>; errors?: unknown[] }>;
    findAsId(filter: string, limit?: number): Promise<string[]>;
    entityCount(filter: string): Promise<number>;
    createUser(email: string, name: string, description: string, roles: string[], password?: string | null, method?: string): Promise<unknown>;
    reloadCache(): Promise<unknown>;
    /** A socket.io-client 2.x Socket, not yet connected (call open()). */
    getWatchSocket(watchId: string): WatchSocket;
    impersonateAs(userId: string): void;
    unsetImpersonate(): void;
  }
  interface WatchSocket {
    open(): WatchSocket;
    close(): WatchSocket;
    on(event: string, listener: (...args: never[]) => void): WatchSocket;
  }
  interface BatchResult<T> {
    success: T[];
    errors: { error: string; args: unknown[] }[];
  }
  export class HisWritePayload {
    constructor(payload?: Record<string, Record<string, unknown>>);
    readonly payload: Record<string, Record<string, unknown>>;
    readonly size: number;
    add(id: string, data: { ts: string; val: string | boolean }[]): void;
    reset(): void;
  }
  const jsWideSky: { WideSkyClient: typeof WideSkyClient; HisWritePayload: typeof HisWritePayload };
  export default jsWideSky;
}
