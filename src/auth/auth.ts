/**
 * src/auth: users, OAuth2 clients, tokens, permissions and impersonation (docs/spec/wire-notes.md §3).
 *
 * - Users, roles and action policies are model entities; password hashes are not tags: they
 *   live in the `auth` sublevel (`pw:<userId>`), as do client secrets (`client:<id>`) and
 *   sessions (`sess:<sid>`). A session ties one login's access tokens and its current refresh
 *   token together, so logout and password changes revoke them at once.
 * - Access tokens are HS256 JWTs (jose) valid 7 days; `expires_in` is their absolute expiry in
 *   epoch ms, as the WideSky client expects. Refresh tokens are random, stored hashed, and rotate
 *   on use; presenting a refresh token that was already rotated away revokes the session (it
 *   was copied).
 * - Verified access tokens are cached (a JWT verification costs ~50 us; a Map lookup does not),
 *   and every use still checks that the session is alive, so revocation takes effect at once.
 */
import { quoteInput } from '../lib/quote.js';
import { createHash, createHmac, randomBytes, randomUUID } from 'node:crypto';
import { chmodSync, existsSync, readFileSync, renameSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { SignJWT, decodeJwt, jwtVerify } from 'jose';
import { HDict, HRef, type HVal, MARKER } from '../haystack/values.js';
import { ErrorCodes, HayloftError } from '../lib/errors.js';
import type { Clock } from '../lib/clock.js';
import type { Logger } from '../lib/log.js';
import type { Model } from '../model/model.js';
import type { Store } from '../store/db.js';
import { Lockout } from './lockout.js';
import { dummyHash, hashPassword, randomSecret, verifyPassword } from './passwords.js';
import { SCRAM_ITERATIONS, type ScramUsers, type ScramVerifier, deriveVerifier } from './scram.js';
import { type Access, Grants, LATER_PERMISSIONS, PERMISSIONS, type Permission, policiesOf } from './permissions.js';
import type { Part } from '../lib/part.js';

export const ACCESS_TTL_MS = 7 * 24 * 3600_000;
export const REFRESH_TTL_MS = 30 * 24 * 3600_000;
export const MIN_PASSWORD_LENGTH = 8;
const MAX_PASSWORD_LENGTH = 1024;
const TOKEN_CACHE_MAX = 10_000;
const KEY_FILE = 'jwt-signing.key';
const ISSUER = 'hayloft';

/**
 * The console's OAuth2 client: public (RFC 6749 §2.1), with no secret, known to the server rather
 * than stored, and accepted only from the console's own origin (the HTTP side checks the request's
 * Origin: auth-http.ts). Its sessions are its own: a refresh token it got cannot be refreshed by
 * another client, nor another client's by it. docs/security.md "The console's login".
 */
export const CONSOLE_CLIENT = 'hayloft-console';

/**
 * Who asks at the token endpoint: a confidential client with its secret, or the console's public
 * client (`secret: null`) once the HTTP side has checked that the request came from its page.
 */
export interface ClientCredentials {
  id: string;
  secret: string | null;
}

export interface TokenResponse {
  access_token: string;
  refresh_token: string;
  /** Absolute expiry of the access token, epoch ms. */
  expires_in: number;
  token_type: 'Bearer';
}

/** Who a request acts as, after authentication (and impersonation). */
export interface Principal {
  userId: string;
  username: string;
  user: HDict;
  grants: Access;
  sid: string;
  /** The real caller's user id when this principal is impersonated. */
  impersonatedBy?: string;
}

interface Session {
  sid: string;
  userId: string;
  clientId: string;
  refreshHash: string;
  prevRefreshHash: string | null;
  refreshExpires: number;
  created: number;
}

interface CachedToken {
  userId: string;
  sid: string;
  exp: number;
  /** Issued while the clock could not be trusted: its expiry is judged in the clock of its issue (see `untrusted`). */
  jti?: string;
  /** The principal built for this token, valid while `gen` is the service's generation. */
  principal?: Principal;
  gen?: number;
}

export interface AuthOptions {
  store: Store;
  model: Model;
  clock: Clock;
  log: Logger;
  /** Whether the wall clock can be trusted (src/lib/clock-trust.ts); trusted when not given. */
  trust?: { trusted(): boolean };
  /** Folder of the signing key file. */
  dataDir: string;
  minPasswordLength?: number;
}

export interface Bootstrap {
  adminUser: string;
  /** Only when generated (printed once). */
  adminPassword?: string;
  clientId: string;
  /** Only when generated (printed once). */
  clientSecret?: string;
}

function sha256(s: string): string {
  return createHash('sha256').update(s).digest('base64url');
}

function unauthorized(message: string): HayloftError {
  return new HayloftError(ErrorCodes.UNAUTHORIZED, message);
}

/** The signing key: 32 random bytes in the data folder, readable by the owner only. */
function loadSigningKey(dir: string, log: Logger): Uint8Array {
  const file = path.join(dir, KEY_FILE);
  if (existsSync(file)) {
    const mode = statSync(file).mode & 0o777;
    if ((mode & 0o077) !== 0) {
      chmodSync(file, 0o600);
      log.warn({ file }, 'the token signing key was readable by others; permissions reset to owner-only');
    }
    const key = Buffer.from(readFileSync(file, 'utf8').trim(), 'base64');
    if (key.length < 32) throw new HayloftError(ErrorCodes.STORE_UNAVAILABLE, `the token signing key ${file} is damaged; delete it to make a new one (everyone will have to log in again)`);
    return key;
  }
  const key = randomBytes(32);
  const tmp = `${file}.${process.pid}.tmp`;
  writeFileSync(tmp, key.toString('base64') + '\n', { mode: 0o600, flag: 'wx' });
  renameSync(tmp, file);
  return key;
}

/**
 * Failed logins before a lockout, by key (see lockKeys). A user's own mistakes lock that user at
 * that address after 5; others behind the same address (a site's NAT, a cloud client's egress)
 * can still log in until 20 failures come from it, the sign of guessing across accounts. A user
 * is locked everywhere after 10, against guessing from several addresses.
 */
const LOCK_THRESHOLDS = { ua: 5, u: 10, ip: 20 };

/** The client id of sessions opened by a Haystack 4 login (SCRAM): they have no refresh token. */
export const HAYSTACK_CLIENT = 'haystack4';

export class AuthService implements Part, ScramUsers {
  readonly name = 'auth';
  private readonly store: Store;
  private readonly model: Model;
  private readonly clock: Clock;
  private readonly log: Logger;
  private readonly key: Uint8Array;
  private readonly minPasswordLength: number;
  private readonly sessions = new Map<string, Session>();
  private readonly byRefresh = new Map<string, string>();
  private readonly tokenCache = new Map<string, CachedToken>();
  private readonly trust: AuthOptions['trust'];
  /**
   * Tokens (by jti) and sessions' refresh expiry (by `sess:` sid) dated while the clock could not
   * be trusted (a Pi booting without its clock, before NTP steps it): the wall and monotonic
   * readings of their issue. Their expiry is judged against the wall clock as it was then, moved
   * on by the monotonic time since (`frameNow`), so a step of the clock (1970 to today) neither
   * ends them at once nor makes them last for years. Kept in memory: after a restart such a
   * session asks for a new login.
   */
  private readonly untrusted = new Map<string, { wall: number; mono: number }>();
  /** The token cachedPrincipal last found (checked again on every use, as any cached token). */
  private lastToken: { token: string; entry: CachedToken } | undefined;
  private readonly grantsCache = new Map<string, Grants>();
  private readonly lockout: Lockout;
  private usernames: Map<string, string> | undefined;
  /** Bumped on every model change: cached principals (user record, grants) go stale with it. */
  private gen = 0;

  private constructor(opts: AuthOptions, key: Uint8Array) {
    this.store = opts.store;
    this.model = opts.model;
    this.clock = opts.clock;
    this.log = opts.log;
    this.trust = opts.trust;
    this.key = key;
    this.minPasswordLength = opts.minPasswordLength ?? MIN_PASSWORD_LENGTH;
    this.lockout = new Lockout(opts.clock, { thresholds: LOCK_THRESHOLDS });
  }

  static async open(opts: AuthOptions): Promise<AuthService> {
    const a = new AuthService(opts, loadSigningKey(opts.dataDir, opts.log));
    const now = opts.clock.now();
    const expired: string[] = [];
    const isUser = (id: string): boolean => opts.model.stored(id)?.has('user') === true;
    for await (const [k, v] of opts.store.auth.iterator({ gte: 'sess:', lt: 'sess;' })) {
      const s = JSON.parse(v) as Session;
      // Sessions of users deleted while the auth sublevel could not follow (a crash) go too.
      if ((s.refreshExpires <= now && s.created + ACCESS_TTL_MS <= now) || !isUser(s.userId)) expired.push(k);
      else a.addSession(s);
    }
    for await (const k of opts.store.auth.keys({ gte: 'pw:', lt: 'pw;' })) if (!isUser(k.slice(3))) expired.push(k);
    for await (const k of opts.store.auth.keys({ gte: 'scram:', lt: 'scram;' })) if (!isUser(k.slice(6))) expired.push(k);
    if (expired.length > 0) await opts.store.auth.batch(expired.map((key) => ({ type: 'del' as const, key })));
    // A deleted user's password hash and sessions are deleted in the same batch as the record,
    // so nothing of it can come back if a record is created again with its id.
    opts.model.events.on('records.batch', a, (change, ops) => {
      for (const r of change.deleted) {
        if (!r.has('user')) continue;
        const id = (r.get('id') as HRef).id;
        ops.del(opts.store.auth, `pw:${id}`);
        ops.del(opts.store.auth, `scram:${id}`);
        for (const s of a.sessions.values()) if (s.userId === id) ops.del(opts.store.auth, `sess:${s.sid}`);
      }
    });
    // Users, roles and policies are entities: any model change may change who may do what.
    opts.model.events.on('records.committed', a, (change) => {
      a.gen++;
      a.grantsCache.clear();
      a.usernames = undefined;
      for (const r of change.deleted) {
        if (!r.has('user')) continue;
        const id = (r.get('id') as HRef).id;
        for (const s of [...a.sessions.values()]) if (s.userId === id) a.dropSession(s);
      }
    });
    return a;
  }

  stop(): void {
    this.model.events.off(this);
  }

  // ---- users and clients ----------------------------------------------------------------

  /** User id by user name (case-insensitive: user names are e-mail addresses). */
  userIdByName(username: string): string | undefined {
    if (this.usernames === undefined) {
      this.usernames = new Map();
      for (const u of this.model.query('user')) {
        const n = u.get('username');
        if (typeof n === 'string') this.usernames.set(n.toLowerCase(), (u.get('id') as HRef).id);
      }
    }
    return this.usernames.get(username.toLowerCase());
  }

  private checkPassword(password: unknown): string {
    if (typeof password !== 'string' || password.length < this.minPasswordLength) {
      throw new HayloftError(ErrorCodes.WEAK_PASSWORD, `the password must have at least ${this.minPasswordLength} characters`);
    }
    if (password.length > MAX_PASSWORD_LENGTH) throw new HayloftError(ErrorCodes.WEAK_PASSWORD, `the password must have at most ${MAX_PASSWORD_LENGTH} characters`);
    return password;
  }

  /** Sets a user's password (hash stored in the auth sublevel, never as a tag). */
  async setPassword(userId: string, password: string): Promise<void> {
    const pw = this.checkPassword(password);
    const user = this.model.stored(userId);
    if (user === undefined || !user.has('user')) throw new HayloftError(ErrorCodes.NOT_FOUND, `no user @${userId}`);
    // The SCRAM verifier (Haystack 4 logins, scram.ts) is derived from the same password, in the same batch.
    const [hash, verifier] = await Promise.all([hashPassword(pw), deriveVerifier(pw)]);
    await this.store.auth.batch().put(`pw:${userId}`, hash).put(`scram:${userId}`, JSON.stringify(verifier)).write();
  }

  /** Creates a user entity with a password; `roleRef` names an existing role (id or name). */
  async addUser(username: string, password: string, roleRef: string, dis?: string, extra: Readonly<Record<string, HVal>> = {}): Promise<string> {
    if (!/^[^\s@]+@[^\s@]+$|^[A-Za-z0-9._-]+$/.test(username)) {
      throw new HayloftError(ErrorCodes.INVALID_RECORD, `${quoteInput(username)} is not a valid user name (an e-mail address, or letters, digits, . _ -)`);
    }
    if (this.userIdByName(username) !== undefined) throw new HayloftError(ErrorCodes.CONFLICT, `user "${username}" already exists`);
    const roleId = this.model.resolveId(roleRef);
    if (roleId === undefined || !this.model.stored(roleId)?.has('role')) throw new HayloftError(ErrorCodes.NOT_FOUND, `no role ${quoteInput(roleRef)}`);
    this.checkPassword(password);
    const [u] = await this.model.create([
      HDict.of({ ...extra, user: MARKER, username, dis: dis ?? username, roleRef: new HRef(roleId) }),
    ]);
    const id = (u?.get('id') as HRef).id;
    await this.setPassword(id, password);
    return id;
  }

  /** Drops cached grants and user names (rebuilt on the next request; model changes drop them too). */
  reloadCache(): void {
    this.gen++;
    this.grantsCache.clear();
    this.usernames = undefined;
  }

  async removeUser(username: string): Promise<void> {
    const id = this.userIdByName(username);
    if (id === undefined) throw new HayloftError(ErrorCodes.NOT_FOUND, `no user ${quoteInput(username)}`);
    // The commit hook deletes its password and sessions in the same batch.
    await this.model.delete([id]);
  }

  listUsers(): { id: string; username: string; role: string | null }[] {
    return this.model.query('user').map((u) => {
      const roleRef = u.get('roleRef');
      return {
        id: (u.get('id') as HRef).id,
        username: String(u.get('username') ?? ''),
        role: roleRef instanceof HRef ? (roleRef.dis ?? roleRef.id) : null,
      };
    });
  }

  async addClient(clientId: string, secret?: string): Promise<string> {
    if (!/^[A-Za-z0-9._~-]{1,128}$/.test(clientId)) throw new HayloftError(ErrorCodes.INVALID_RECORD, `${quoteInput(clientId)} is not a valid client id (letters, digits, . _ ~ -)`);
    if (clientId === CONSOLE_CLIENT) throw new HayloftError(ErrorCodes.CONFLICT, `client id "${CONSOLE_CLIENT}" is the console's own (public, without a secret): choose another`);
    if ((await this.store.auth.get(`client:${clientId}`)) !== undefined) throw new HayloftError(ErrorCodes.CONFLICT, `client "${clientId}" already exists`);
    const s = secret ?? randomSecret();
    if (s.length < 16) throw new HayloftError(ErrorCodes.WEAK_PASSWORD, 'a client secret must have at least 16 characters');
    await this.store.auth.put(`client:${clientId}`, await hashPassword(s));
    return s;
  }

  async listClients(): Promise<string[]> {
    const out: string[] = [];
    for await (const k of this.store.auth.keys({ gte: 'client:', lt: 'client;' })) out.push(k.slice(7));
    return out;
  }

  async removeClient(clientId: string): Promise<void> {
    if ((await this.store.auth.get(`client:${clientId}`)) === undefined) throw new HayloftError(ErrorCodes.NOT_FOUND, `no client "${clientId}"`);
    await this.store.auth.del(`client:${clientId}`);
    const batch = this.store.auth.batch();
    for (const s of [...this.sessions.values()]) {
      if (s.clientId !== clientId) continue;
      this.dropSession(s);
      batch.del(`sess:${s.sid}`);
    }
    await batch.write();
  }

  /**
   * A data folder made before a permission existed: its first administrator's policy
   * (`admin-all`, made by bootstrap) that still holds every permission there was then gets the
   * new ones, so administrators can do everything as before. A policy narrowed on purpose (one of
   * the old permissions taken out) is left as it is, and so is every other policy. Returns what
   * it added.
   */
  async grantNewPermissions(): Promise<Permission[]> {
    const added: Permission[] = [];
    for (const policy of this.model.query('actionPolicy and name == "admin-all"')) {
      const list = policy.get('permissions');
      if (!Array.isArray(list)) continue;
      const held = list as readonly HVal[];
      const has = new Set(held.filter((p): p is string => typeof p === 'string'));
      const missing = LATER_PERMISSIONS.filter(({ perm, before }) => !has.has(perm) && before.every((p) => has.has(p))).map(({ perm }) => perm);
      if (missing.length === 0) continue;
      await this.model.update([HDict.of({ id: policy.get('id') as HRef, permissions: Object.freeze([...held, ...missing]) })]);
      this.log.info({ policy: (policy.get('id') as HRef).id, added: missing }, 'the administrators\' policy was given the permissions added since it was made');
      added.push(...missing);
    }
    return added;
  }

  /** True when no user exists yet (first start). */
  needsBootstrap(): boolean {
    return this.model.query('user', 1).length === 0;
  }

  /**
   * First start: an administrator with every permission and one OAuth2 client, from the given
   * values or generated (then returned so the caller prints them once).
   */
  async bootstrap(given: { adminUser?: string; adminPassword?: string; clientId?: string; clientSecret?: string }): Promise<Bootstrap> {
    const adminUser = given.adminUser ?? 'admin@hayloft.local';
    const adminPassword = given.adminPassword ?? randomSecret(12);
    const clientId = given.clientId ?? 'hayloft';
    const [policy] = await this.model.create([
      HDict.of({ actionPolicy: MARKER, name: 'admin-all', dis: 'Everything', permissions: Object.freeze([...PERMISSIONS]) }),
    ]);
    const [role] = await this.model.create([
      HDict.of({ role: MARKER, name: 'admin', dis: 'Administrator', actionPolicyRefs: Object.freeze([policy?.get('id') as HVal]) }),
    ]);
    await this.addUser(adminUser, adminPassword, (role?.get('id') as HRef).id, 'Administrator');
    const existing = await this.store.auth.get(`client:${clientId}`);
    let clientSecret: string | undefined;
    if (existing === undefined) clientSecret = await this.addClient(clientId, given.clientSecret);
    return {
      adminUser,
      ...(given.adminPassword === undefined ? { adminPassword } : {}),
      clientId,
      ...(given.clientSecret === undefined && clientSecret !== undefined ? { clientSecret } : {}),
    };
  }

  // ---- the token endpoint ---------------------------------------------------------------

  private async checkClient(clientId: string, secret: string | null): Promise<void> {
    if (secret === null) {
      // Only the console is a public client; the HTTP side has checked the request's origin.
      if (clientId !== CONSOLE_CLIENT) throw new HayloftError(ErrorCodes.INVALID_CLIENT, `client "${clientId}" must authenticate with its secret (HTTP Basic)`);
      return;
    }
    if (clientId === CONSOLE_CLIENT) throw new HayloftError(ErrorCodes.INVALID_CLIENT, `client "${CONSOLE_CLIENT}" is public: it has no secret`);
    const hash = await this.store.auth.get(`client:${clientId}`);
    const ok = await verifyPassword(secret, hash ?? (await dummyHash()));
    if (hash === undefined || !ok) throw new HayloftError(ErrorCodes.INVALID_CLIENT, 'unknown client or wrong client secret');
  }

  /** A user at an address, the user from anywhere, the address for every user (LOCK_THRESHOLDS). */
  private lockKeys(username: string, address: string): string[] {
    const user = username.toLowerCase();
    return [`ua:${user}@${address}`, `u:${user}`, `ip:${address}`];
  }

  private checkLockout(keys: string[]): void {
    const wait = this.lockout.waitMs(keys);
    if (wait > 0) {
      const s = Math.ceil(wait / 1000);
      throw new HayloftError(ErrorCodes.LOCKED_OUT, `too many failed logins; try again in ${s} s`, { retryAfter: s });
    }
  }

  /** grant_type=password. `address` is the caller's IP address (for the lockout). */
  async passwordGrant(client: ClientCredentials, username: string, password: string, address: string): Promise<TokenResponse> {
    const keys = this.lockKeys(username, address);
    this.checkLockout(keys);
    try {
      await this.checkClient(client.id, client.secret);
    } catch (e) {
      this.lockout.failure([`ip:${address}`]);
      throw e;
    }
    const userId = this.userIdByName(username);
    const hash = userId === undefined ? undefined : await this.store.auth.get(`pw:${userId}`);
    // Verify against a dummy hash for unknown users so timing does not reveal who exists.
    const ok = await verifyPassword(password, hash ?? (await dummyHash()));
    if (userId === undefined || hash === undefined || !ok) {
      this.lockout.failure(keys);
      this.log.warn({ username, address }, 'failed login');
      throw new HayloftError(ErrorCodes.INVALID_GRANT, 'wrong user name or password');
    }
    this.lockout.success(keys);
    // A user whose password was set before SCRAM verifiers existed gets one now, from the password
    // just checked: from then on Haystack 4 clients can log in as that user too.
    if ((await this.store.auth.get(`scram:${userId}`)) === undefined) await this.store.auth.put(`scram:${userId}`, JSON.stringify(await deriveVerifier(password)));
    return this.newSession(userId, client.id);
  }

  // ---- Haystack 4 logins (scram.ts) ------------------------------------------------------

  async scramVerifier(username: string): Promise<{ userId: string | undefined; verifier: ScramVerifier }> {
    const userId = this.userIdByName(username);
    const stored = userId === undefined ? undefined : await this.store.auth.get(`scram:${userId}`);
    if (userId !== undefined && stored !== undefined) return { userId, verifier: JSON.parse(stored) as ScramVerifier };
    if (userId !== undefined) this.log.warn({ username }, 'Haystack 4 login of a user without a SCRAM verifier: it gets one when its password is set or at its next WideSky login');
    // The same salt for the same unknown name on every try (keyed by the signing key), and keys
    // that no proof matches: the answer does not tell who exists.
    const salt = createHmac('sha256', this.key).update(`scram-salt:${username.toLowerCase()}`).digest().subarray(0, 16);
    const junk = createHmac('sha256', this.key).update(`scram-key:${username.toLowerCase()}`).digest('base64');
    return { userId: undefined, verifier: { salt: salt.toString('base64'), iterations: SCRAM_ITERATIONS, storedKey: junk, serverKey: junk } };
  }

  checkLoginLockout(username: string, address: string): void {
    this.checkLockout(this.lockKeys(username, address));
  }

  loginFailed(username: string, address: string): void {
    this.lockout.failure(this.lockKeys(username, address));
    this.log.warn({ username, address }, 'failed login (Haystack 4)');
  }

  loginSucceeded(username: string, address: string): void {
    this.lockout.success(this.lockKeys(username, address));
  }

  /**
   * A session for a user who completed a Haystack 4 login: its access token is the `authToken`
   * (a JWT like every other, so expiry, revocation and the token cache are the same). It has no
   * usable refresh token: a Haystack client logs in again when its token expires.
   */
  async haystackSession(userId: string): Promise<string> {
    const now = this.clock.now();
    const s: Session = { sid: randomUUID(), userId, clientId: HAYSTACK_CLIENT, refreshHash: sha256(randomSecret(32)), prevRefreshHash: null, refreshExpires: now, created: now };
    await this.store.auth.put(`sess:${s.sid}`, JSON.stringify(s));
    this.addSession(s);
    return (await this.accessToken(userId, s.sid)).access_token;
  }

  /** grant_type=refresh_token: rotates the refresh token. */
  async refreshGrant(client: ClientCredentials, refreshToken: string, address: string): Promise<TokenResponse> {
    const keys = [`ip:${address}`];
    this.checkLockout(keys);
    await this.checkClient(client.id, client.secret).catch((e: unknown) => {
      this.lockout.failure(keys);
      throw e;
    });
    const h = sha256(refreshToken);
    const sid = this.byRefresh.get(h);
    const s = sid === undefined ? undefined : this.sessions.get(sid);
    if (s === undefined || s.clientId !== client.id || s.refreshExpires <= this.frameNow(`sess:${s.sid}`)) {
      const stolen = [...this.sessions.values()].find((x) => x.prevRefreshHash === h);
      if (stolen !== undefined) {
        // A rotated-away refresh token came back: someone holds a copy. End the session.
        this.log.warn({ userId: stolen.userId }, 'a refresh token was reused after rotation; the session is revoked');
        await this.revokeSession(stolen.sid);
      }
      this.lockout.failure(keys);
      throw new HayloftError(ErrorCodes.INVALID_GRANT, 'unknown, expired or revoked refresh token; log in again');
    }
    const user = this.model.stored(s.userId);
    if (user === undefined) {
      await this.revokeSession(s.sid);
      throw new HayloftError(ErrorCodes.INVALID_GRANT, 'the user no longer exists');
    }
    // A success from this address, as a successful login is: its failures were not consecutive.
    this.lockout.success(keys);
    const refresh = randomSecret(32);
    const next: Session = { ...s, prevRefreshHash: s.refreshHash, refreshHash: sha256(refresh), refreshExpires: this.clock.now() + REFRESH_TTL_MS };
    await this.store.auth.put(`sess:${s.sid}`, JSON.stringify(next));
    this.untrusted.delete(`sess:${s.sid}`);
    this.stamp(`sess:${s.sid}`, this.clock.now());
    this.dropSession(s);
    this.addSession(next);
    return { ...(await this.accessToken(s.userId, s.sid)), refresh_token: refresh };
  }

  /** Remembers `key` as dated on an untrusted clock (when it is). */
  private stamp(key: string, wall: number): void {
    if (this.trust === undefined || this.trust.trusted()) return;
    if (this.untrusted.size >= TOKEN_CACHE_MAX) {
      const mono = this.clock.monotonic();
      for (const [k, v] of this.untrusted) if (mono - v.mono > REFRESH_TTL_MS) this.untrusted.delete(k);
    }
    this.untrusted.set(key, { wall, mono: this.clock.monotonic() });
  }

  /** Now, in the clock `key` was dated on: the wall clock, or the untrusted one it was issued under. */
  private frameNow(key: string | undefined): number {
    const st = key === undefined ? undefined : this.untrusted.get(key);
    return st === undefined ? this.clock.now() : st.wall + (this.clock.monotonic() - st.mono);
  }

  private async newSession(userId: string, clientId: string): Promise<TokenResponse> {
    const refresh = randomSecret(32);
    const now = this.clock.now();
    const s: Session = { sid: randomUUID(), userId, clientId, refreshHash: sha256(refresh), prevRefreshHash: null, refreshExpires: now + REFRESH_TTL_MS, created: now };
    await this.store.auth.put(`sess:${s.sid}`, JSON.stringify(s));
    this.stamp(`sess:${s.sid}`, now);
    this.addSession(s);
    return { ...(await this.accessToken(userId, s.sid)), refresh_token: refresh };
  }

  private async accessToken(userId: string, sid: string): Promise<Omit<TokenResponse, 'refresh_token'>> {
    const now = this.clock.now();
    const exp = now + ACCESS_TTL_MS;
    const jti = randomUUID();
    this.stamp(jti, now);
    const token = await new SignJWT({ sid })
      .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
      .setIssuer(ISSUER)
      .setSubject(userId)
      .setJti(jti)
      .setIssuedAt(Math.floor(now / 1000))
      .setExpirationTime(Math.floor(exp / 1000))
      .sign(this.key);
    return { access_token: token, expires_in: Math.floor(exp / 1000) * 1000, token_type: 'Bearer' };
  }

  private addSession(s: Session): void {
    this.sessions.set(s.sid, s);
    this.byRefresh.set(s.refreshHash, s.sid);
  }

  private dropSession(s: Session): void {
    this.sessions.delete(s.sid);
    this.byRefresh.delete(s.refreshHash);
  }

  private async revokeSession(sid: string): Promise<void> {
    const s = this.sessions.get(sid);
    if (s === undefined) return;
    this.dropSession(s);
    await this.store.auth.del(`sess:${sid}`);
  }

  /** Revokes every session of a user except `keep`. */
  async revokeUser(userId: string, keep: string | null): Promise<void> {
    const batch = this.store.auth.batch();
    for (const s of [...this.sessions.values()]) {
      if (s.userId !== userId || s.sid === keep) continue;
      this.dropSession(s);
      batch.del(`sess:${s.sid}`);
    }
    await batch.write();
  }

  /** Ends a session (Haystack 4's `close`): its tokens stop working at once. */
  async endSession(sid: string): Promise<void> {
    await this.revokeSession(sid);
  }

  /** Logout: the token's session (its access and refresh tokens) stops working. */
  async logout(accessToken: string): Promise<void> {
    const p = await this.authenticate(accessToken);
    await this.revokeSession(p.sid);
  }

  // ---- requests -------------------------------------------------------------------------

  private async verify(token: string): Promise<CachedToken> {
    const hit = this.tokenCache.get(token);
    if (hit !== undefined) {
      if (hit.exp > this.frameNow(hit.jti)) return hit;
      this.tokenCache.delete(token);
      throw unauthorized('the access token has expired; refresh it or log in again');
    }
    let payload;
    try {
      // A token issued while the clock could not be trusted is judged in the clock it was issued under.
      let now = this.clock.now();
      if (this.untrusted.size > 0) {
        const jti = decodeJwt(token).jti;
        if (typeof jti === 'string') now = this.frameNow(jti);
      }
      ({ payload } = await jwtVerify(token, this.key, { algorithms: ['HS256'], issuer: ISSUER, currentDate: new Date(now) }));
    } catch (e) {
      const code = (e as { code?: string }).code;
      throw unauthorized(code === 'ERR_JWT_EXPIRED' ? 'the access token has expired; refresh it or log in again' : 'invalid access token');
    }
    if (typeof payload.sub !== 'string' || typeof payload.sid !== 'string' || typeof payload.exp !== 'number') throw unauthorized('invalid access token');
    const entry: CachedToken = { userId: payload.sub, sid: payload.sid, exp: payload.exp * 1000 };
    if (typeof payload.jti === 'string' && this.untrusted.has(payload.jti)) entry.jti = payload.jti;
    if (this.tokenCache.size >= TOKEN_CACHE_MAX) this.tokenCache.clear();
    this.tokenCache.set(token, entry);
    return entry;
  }

  private grantsOf(userId: string, user: HDict): Grants {
    let g = this.grantsCache.get(userId);
    if (g === undefined) {
      g = new Grants(this.model, policiesOf(this.model, user));
      this.grantsCache.set(userId, g);
    }
    return g;
  }

  private principal(userId: string, sid: string): Principal | undefined {
    const user = this.model.get(userId);
    if (user === undefined || !user.has('user')) return undefined;
    return { userId, username: String(user.get('username') ?? ''), user, grants: this.grantsOf(userId, user), sid };
  }

  /**
   * The principal of a user acting without a session (an MQTT host application's commands run as
   * the configured `writeAs` user), holding the same cached grants as that user's requests;
   * undefined when no such user exists.
   */
  userPrincipal(username: string): Principal | undefined {
    const id = this.userIdByName(username);
    return id === undefined ? undefined : this.principal(id, '');
  }

  /**
   * The principal of a token already verified and still valid (unexpired, session alive, users
   * unchanged since), without a promise: the common case of every request. `undefined` means
   * "ask authenticate", which also gives the reason for a refusal.
   */
  cachedPrincipal(token: string): Principal | undefined {
    // The last token first: a client sends the same one on every request, and comparing it is
    // cheaper than hashing a new 300-character header string for the map (3 % of a read by id).
    const last = this.lastToken;
    const t = last !== undefined && last.token === token ? last.entry : this.tokenCache.get(token);
    if (t !== undefined && t !== last?.entry) this.lastToken = { token, entry: t };
    if (t?.principal === undefined || t.gen !== this.gen || t.exp <= (t.jti === undefined ? this.clock.now() : this.frameNow(t.jti)) || !this.sessions.has(t.sid)) return undefined;
    return t.principal;
  }

  /** The principal of a bearer token; HL_UNAUTHORIZED when missing, invalid, expired or revoked. */
  async authenticate(token: string): Promise<Principal> {
    const t = await this.verify(token);
    if (!this.sessions.has(t.sid)) throw unauthorized('the access token was revoked; log in again');
    if (t.principal !== undefined && t.gen === this.gen) return t.principal;
    const p = this.principal(t.userId, t.sid);
    if (p === undefined) throw unauthorized('the user of this access token no longer exists');
    t.principal = p;
    t.gen = this.gen;
    return p;
  }

  /**
   * X-IMPERSONATE: act as another user. The caller needs IMPERSONATE and MODEL_READ on the
   * target user's entity; any failure is the same brief refusal (docs/spec/interface.md).
   */
  impersonate(caller: Principal, targetId: string): Principal {
    const refuse = new HayloftError(ErrorCodes.CANNOT_IMPERSONATE, 'Cannot impersonate');
    const id = this.model.resolveId(targetId.startsWith('@') ? targetId.slice(1) : targetId);
    const target = id === undefined ? undefined : this.principal(id, caller.sid);
    if (target === undefined || !caller.grants.has('IMPERSONATE') || !caller.grants.allows('MODEL_READ', target.user)) throw refuse;
    return { ...target, impersonatedBy: caller.userId };
  }

  /** Changes the caller's own password and revokes the user's other sessions. */
  async updatePassword(p: Principal, newPassword: unknown): Promise<void> {
    const pw = this.checkPassword(newPassword);
    await this.setPassword(p.userId, pw);
    await this.revokeUser(p.userId, p.sid);
    this.log.info({ userId: p.userId }, 'password changed');
  }
}
