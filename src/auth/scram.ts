/**
 * SCRAM-SHA-256 (RFC 5802, RFC 7677) as the Project Haystack authentication spec uses it (docs/haystack4.md):
 * the server side of the HELLO / SCRAM handshake, and the stored verifiers it checks against.
 *
 * Written on node:crypto (PBKDF2, HMAC, SHA-256) rather than a library: the npm SCRAM packages are
 * client sides for databases (Mongo, Postgres) with their own framing, and the server side is a few
 * lines of the RFC once the verifier is stored. The tests check it against a client written from
 * RFC 7677's worked example (test/auth/scram.test.ts).
 *
 * Verifiers: a user's password is never kept; what SCRAM needs of it is stored beside the scrypt
 * hash in the auth sublevel (`scram:<userId>`): salt, iterations, StoredKey and ServerKey (RFC 5802
 * §3). They are derived whenever the password is set, and for a user whose password was set before
 * verifiers existed, at that user's next password login through the WideSky API or the console.
 *
 * Handshakes live in memory, keyed by a random handshake token, for HANDSHAKE_TTL_MS on the
 * monotonic clock; each step consumes its state, so a replayed or reordered message finds nothing.
 */
import { createHash, createHmac, pbkdf2, randomBytes, timingSafeEqual } from 'node:crypto';
import { ErrorCodes, HayloftError } from '../lib/errors.js';
import type { Clock } from '../lib/clock.js';

/** What the server stores per user (base64 fields, as RFC 5802's `s=` and the keys are). */
export interface ScramVerifier {
  salt: string;
  iterations: number;
  storedKey: string;
  serverKey: string;
}

/** RFC 7677 asks for at least 4096; Haxall's default is 10,000. About 10 ms on a small ARM board. */
export const SCRAM_ITERATIONS = 10_000;
export const HANDSHAKE_TTL_MS = 60_000;
/** Handshakes kept at once (oldest dropped first), so a flood of HELLOs cannot grow memory. */
const MAX_HANDSHAKES = 1_000;

const hmac = (key: Buffer, text: string): Buffer => createHmac('sha256', key).update(text, 'utf8').digest();
const sha256 = (b: Buffer): Buffer => createHash('sha256').update(b).digest();

/** The SCRAM keys of a salted password (RFC 5802 §3). */
export function scramKeys(saltedPassword: Buffer): { clientKey: Buffer; storedKey: Buffer; serverKey: Buffer } {
  const clientKey = hmac(saltedPassword, 'Client Key');
  return { clientKey, storedKey: sha256(clientKey), serverKey: hmac(saltedPassword, 'Server Key') };
}

/**
 * Hi() of RFC 5802: PBKDF2 with HMAC-SHA-256, 32 bytes, off the event loop (libuv's pool), as
 * scrypt is for the password hashes: tens of milliseconds on a small board.
 */
export function saltedPassword(password: string, salt: Buffer, iterations: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    // RFC 5802 asks for SASLprep; NFC is what the scrypt hashes use too (passwords.ts), and equal for ASCII.
    pbkdf2(password.normalize('NFC'), salt, iterations, 32, 'sha256', (err, key) => (err ? reject(err) : resolve(key)));
  });
}

export async function deriveVerifier(password: string, salt: Buffer = randomBytes(16), iterations = SCRAM_ITERATIONS): Promise<ScramVerifier> {
  const { storedKey, serverKey } = scramKeys(await saltedPassword(password, salt, iterations));
  return { salt: salt.toString('base64'), iterations, storedKey: storedKey.toString('base64'), serverKey: serverKey.toString('base64') };
}

/** base64url without padding (the Haystack spec's "base64uri"), for header parameters. */
export function toBase64Uri(text: string): string {
  return Buffer.from(text, 'utf8').toString('base64url');
}

/** Decodes base64 or base64url, padded or not; HL_AUTH_FAILED when it is neither. */
export function fromBase64Any(text: string, what: string): string {
  if (!/^[A-Za-z0-9+/_-]*={0,2}$/.test(text)) throw failed(`${what} is not base64`);
  return Buffer.from(text, 'base64').toString('utf8');
}

function failed(message: string): HayloftError {
  return new HayloftError(ErrorCodes.AUTH_FAILED, message);
}

/** `a=1,b=2` attributes of a SCRAM message (values may hold `=`). */
function attrs(msg: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const part of msg.split(',')) {
    const i = part.indexOf('=');
    if (i > 0 && !out.has(part.slice(0, i))) out.set(part.slice(0, i), part.slice(i + 1));
  }
  return out;
}

/** RFC 5802 §5.1: `=2C` and `=3D` stand for `,` and `=` in a user name. */
function unescapeName(n: string): string {
  return n.replace(/=2C/g, ',').replace(/=3D/g, '=');
}

/** Where the server looks up verifiers and answers for failures; the auth service implements it. */
export interface ScramUsers {
  /**
   * The verifier of a user; for an unknown user (or one without a verifier yet) a fake one that is
   * the same on every call, so the server-first message does not reveal who exists.
   */
  scramVerifier(username: string): Promise<{ userId: string | undefined; verifier: ScramVerifier }>;
  /** Throws HL_LOCKED_OUT while the user at this address may not try (the WideSky logins' lockout). */
  checkLoginLockout(username: string, address: string): void;
  loginFailed(username: string, address: string): void;
  loginSucceeded(username: string, address: string): void;
}

interface Handshake {
  username: string;
  address: string;
  expires: number;
  /** After the client-first message. */
  first?: { clientFirstBare: string; serverFirst: string; nonce: string; gs2: string; userId: string | undefined; verifier: ScramVerifier };
}

/** The server side of the handshake. Steps throw HayloftErrors (HL_UNAUTHORIZED, HL_AUTH_FAILED, HL_LOCKED_OUT). */
export class ScramServer {
  private readonly handshakes = new Map<string, Handshake>();

  constructor(
    private readonly users: ScramUsers,
    private readonly clock: Clock,
  ) {}

  /** HELLO: a handshake token for this user name. */
  hello(username: string, address: string): { handshakeToken: string } {
    if (username === '') throw new HayloftError(ErrorCodes.UNAUTHORIZED, 'HELLO needs username=<base64uri of the user name>');
    this.users.checkLoginLockout(username, address);
    this.expire();
    const handshakeToken = randomBytes(18).toString('base64url');
    this.handshakes.set(handshakeToken, { username, address, expires: this.clock.monotonic() + HANDSHAKE_TTL_MS });
    while (this.handshakes.size > MAX_HANDSHAKES) this.handshakes.delete(this.handshakes.keys().next().value as string);
    return { handshakeToken };
  }

  /** Takes a handshake out of the table: every step consumes it, so nothing can be replayed. */
  private take(token: string): Handshake {
    const h = this.handshakes.get(token);
    this.handshakes.delete(token);
    if (h === undefined || h.expires <= this.clock.monotonic()) {
      throw new HayloftError(ErrorCodes.UNAUTHORIZED, 'unknown, used or expired handshakeToken: start again with HELLO');
    }
    return h;
  }

  /** The client-first message (decoded text): answers the server-first message. */
  async clientFirst(token: string, message: string): Promise<{ serverFirst: string }> {
    const h = this.take(token);
    const m = /^([ny]),(a=[^,]*)?,(.*)$/.exec(message);
    if (m === null) throw failed('the client-first message must start with the gs2 header "n,," (channel binding is not supported)');
    const gs2 = `${m[1]},${m[2] ?? ''},`;
    const clientFirstBare = m[3] as string;
    const a = attrs(clientFirstBare);
    const cnonce = a.get('r');
    if (cnonce === undefined || cnonce === '' || !/^[\x21-\x2b\x2d-\x7e]+$/.test(cnonce)) throw failed('the client-first message needs a client nonce r=');
    const name = a.get('n');
    if (name === undefined || unescapeName(name) !== h.username) throw failed('the user name of the client-first message is not the one of HELLO');
    const { userId, verifier } = await this.users.scramVerifier(h.username);
    const nonce = cnonce + randomBytes(18).toString('base64url');
    const serverFirst = `r=${nonce},s=${verifier.salt},i=${verifier.iterations}`;
    this.handshakes.set(token, { ...h, expires: this.clock.monotonic() + HANDSHAKE_TTL_MS, first: { clientFirstBare, serverFirst, nonce, gs2, userId, verifier } });
    return { serverFirst };
  }

  /**
   * The client-final message: checks the proof. Success gives the user and the server-final
   * message (`v=` the server signature); any failure counts for the login lockout.
   */
  clientFinal(token: string, message: string): { userId: string; username: string; serverFinal: string } {
    const h = this.take(token);
    const f = h.first;
    if (f === undefined) throw new HayloftError(ErrorCodes.UNAUTHORIZED, 'the handshake is at its first step: send the client-first message');
    try {
      this.users.checkLoginLockout(h.username, h.address);
      const i = message.lastIndexOf(',p=');
      if (i < 0) throw failed('the client-final message needs the proof p=');
      const withoutProof = message.slice(0, i);
      const a = attrs(withoutProof);
      if (a.get('c') !== Buffer.from(f.gs2, 'utf8').toString('base64')) throw failed('the channel binding c= does not match the gs2 header');
      if (a.get('r') !== f.nonce) throw failed('the nonce r= is not the one the server sent');
      const proof = Buffer.from(message.slice(i + 3), 'base64');
      const authMessage = `${f.clientFirstBare},${f.serverFirst},${withoutProof}`;
      const storedKey = Buffer.from(f.verifier.storedKey, 'base64');
      const clientSignature = hmac(storedKey, authMessage);
      if (proof.length !== clientSignature.length) throw failed('wrong user name or password');
      const clientKey = Buffer.alloc(proof.length);
      for (let k = 0; k < proof.length; k++) clientKey[k] = (proof[k] as number) ^ (clientSignature[k] as number);
      if (!timingSafeEqual(sha256(clientKey), storedKey) || f.userId === undefined) throw failed('wrong user name or password');
      this.users.loginSucceeded(h.username, h.address);
      const serverSignature = hmac(Buffer.from(f.verifier.serverKey, 'base64'), authMessage);
      return { userId: f.userId, username: h.username, serverFinal: `v=${serverSignature.toString('base64')}` };
    } catch (e) {
      if (e instanceof HayloftError && e.code === ErrorCodes.AUTH_FAILED) this.users.loginFailed(h.username, h.address);
      throw e;
    }
  }

  private expire(): void {
    const now = this.clock.monotonic();
    for (const [k, h] of this.handshakes) {
      if (h.expires > now) break;
      this.handshakes.delete(k);
    }
  }
}
