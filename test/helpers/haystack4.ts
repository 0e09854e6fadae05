/**
 * A Haystack 4 client for tests (issue 31): a SCRAM-SHA-256 client written from RFC 5802 §3 (not
 * the server's code; test/auth/scram.test.ts checks it against RFC 7677's test vector), the
 * HELLO / SCRAM / BEARER login of the Project Haystack auth spec over HTTP, and calls to
 * /haystack/<op> in Zinc or Hayson.
 */
import { createHash, createHmac, pbkdf2Sync } from 'node:crypto';


const H = (b: Buffer): Buffer => createHash('sha256').update(b).digest();
const HMAC = (key: Buffer, s: string): Buffer => createHmac('sha256', key).update(s).digest();
const xor = (a: Buffer, b: Buffer): Buffer => Buffer.from(a.map((x, i) => x ^ (b[i] as number)));

export class TestScramClient {
  readonly clientFirstBare: string;
  serverSignature = '';
  constructor(
    readonly user: string,
    readonly password: string,
    readonly cnonce: string,
  ) {
    this.clientFirstBare = `n=${user},r=${cnonce}`;
  }
  first(): string {
    return `n,,${this.clientFirstBare}`;
  }
  /** The client-final message for a server-first message (and the server signature it expects). */
  final(serverFirst: string): string {
    const a = Object.fromEntries(serverFirst.split(',').map((p) => [p.slice(0, p.indexOf('=')), p.slice(p.indexOf('=') + 1)]));
    const salted = pbkdf2Sync(this.password, Buffer.from(a.s as string, 'base64'), Number(a.i), 32, 'sha256');
    const clientKey = HMAC(salted, 'Client Key');
    const storedKey = H(clientKey);
    const withoutProof = `c=biws,r=${a.r as string}`;
    const authMessage = `${this.clientFirstBare},${serverFirst},${withoutProof}`;
    const proof = xor(clientKey, HMAC(storedKey, authMessage));
    this.serverSignature = HMAC(HMAC(salted, 'Server Key'), authMessage).toString('base64');
    return `${withoutProof},p=${proof.toString('base64')}`;
  }
}


/** `SCHEME a=1, b=2` parameters of a WWW-Authenticate or Authentication-Info header. */
export function headerParams(h: string | null): Record<string, string> {
  const out: Record<string, string> = {};
  if (h === null) return out;
  const body = /^[A-Za-z]+ /.test(h) ? h.slice(h.indexOf(' ') + 1) : h;
  for (const part of body.split(',')) {
    const i = part.indexOf('=');
    if (i > 0) out[part.slice(0, i).trim()] = part.slice(i + 1).trim();
  }
  return out;
}

const b64uri = (s: string): string => Buffer.from(s, 'utf8').toString('base64url');
const unb64 = (s: string): string => Buffer.from(s, 'base64').toString('utf8');

export interface LoginSteps {
  hello: Response;
  first: Response;
  final: Response;
  authToken: string | undefined;
  /** Whether the server's signature in the final answer is the one the client computed. */
  serverVerified: boolean;
}

/** The login of the Haystack auth spec, step by step, on `${base}/haystack/about`. */
export async function h4Login(base: string, username: string, password: string, nonce = 'c' + Math.random().toString(36).slice(2)): Promise<LoginSteps> {
  const url = `${base}/haystack/about`;
  const hello = await fetch(url, { headers: { authorization: `HELLO username=${b64uri(username)}` } });
  await hello.text();
  // Refused at HELLO (locked out): every step is that answer.
  if (hello.status !== 401) return { hello, first: hello, final: hello, authToken: undefined, serverVerified: false };
  const hs = headerParams(hello.headers.get('www-authenticate'));
  const c = new TestScramClient(username, password, nonce);
  const first = await fetch(url, { headers: { authorization: `SCRAM handshakeToken=${hs.handshakeToken ?? ''}, hash=SHA-256, data=${b64uri(c.first())}` } });
  await first.text();
  if (first.status !== 401) return { hello, first, final: first, authToken: undefined, serverVerified: false };
  const fs = headerParams(first.headers.get('www-authenticate'));
  const serverFirst = unb64(fs.data ?? '');
  const final = await fetch(url, { headers: { authorization: `SCRAM handshakeToken=${fs.handshakeToken ?? ''}, data=${b64uri(c.final(serverFirst))}` } });
  const info = headerParams(final.headers.get('authentication-info'));
  return { hello, first, final, authToken: info.authToken, serverVerified: info.data !== undefined && unb64(info.data) === `v=${c.serverSignature}` };
}

export interface H4Answer {
  status: number;
  text: string;
  headers: Headers;
}

/** A call to /haystack/<op>: GET without a body, else POST of `body` as `contentType` (Zinc by default); no Accept unless given. */
export async function h4Call(base: string, op: string, opts: { token?: string; body?: string; contentType?: string; accept?: string; query?: string; headers?: Record<string, string> } = {}): Promise<H4Answer> {
  const headers: Record<string, string> = { ...(opts.headers ?? {}) };
  if (opts.token !== undefined) headers.authorization = `BEARER authToken=${opts.token}`;
  if (opts.accept !== undefined) headers.accept = opts.accept;
  if (opts.body !== undefined) headers['content-type'] = opts.contentType ?? 'text/zinc; charset=utf-8';
  const res = await fetch(`${base}/haystack/${op}${opts.query ?? ''}`, { method: opts.body === undefined ? 'GET' : 'POST', headers, ...(opts.body === undefined ? {} : { body: opts.body }) });
  return { status: res.status, text: await res.text(), headers: res.headers };
}
