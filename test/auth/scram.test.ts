/**
 * Issue 31: the server side of SCRAM-SHA-256 (src/auth/scram.ts) against a client written here
 * from RFC 5802 §3 and checked against RFC 7677's worked example (its test vector), not the
 * server's own code: wrong passwords, replayed, tampered and reordered messages, expired
 * handshakes, and that failures count for the lockout.
 */
import t, { type Test } from 'tap';
import { HANDSHAKE_TTL_MS, ScramServer, type ScramUsers, type ScramVerifier, deriveVerifier } from '../../src/auth/scram.js';
import { ManualClock } from '../../src/lib/clock.js';
import { ErrorCodes, HayloftError } from '../../src/lib/errors.js';
import { TestScramClient } from '../helpers/haystack4.js';

t.test('the test client reproduces RFC 7677 §3', async (t) => {
  const c = new TestScramClient('user', 'pencil', 'rOprNGfwEbeRWgbNEkqO');
  t.equal(c.first(), 'n,,n=user,r=rOprNGfwEbeRWgbNEkqO');
  const serverFirst = 'r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096';
  t.equal(c.final(serverFirst), 'c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=');
  t.equal(c.serverSignature, '6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=');
});

// ---- the server ---------------------------------------------------------------------------

/** RFC 7677's user, verifier derived by the server's code from its salt and iteration count. */
const VECTOR: ScramVerifier = await deriveVerifier('pencil', Buffer.from('W22ZaJ0SNY7soEsUEjb6gQ==', 'base64'), 4096);
const UNKNOWN: ScramVerifier = await deriveVerifier('x-unknown', Buffer.alloc(16), 4096);

function world(): { server: ScramServer; clock: ManualClock; failures: string[]; successes: string[]; locked: Set<string> } {
  const clock = new ManualClock(Date.UTC(2026, 0, 1));
  const failures: string[] = [];
  const successes: string[] = [];
  const locked = new Set<string>();
  const users: ScramUsers = {
    scramVerifier: (username) => Promise.resolve(username === 'user' ? { userId: 'u1', verifier: VECTOR } : { userId: undefined, verifier: UNKNOWN }),
    checkLoginLockout: (username) => {
      if (locked.has(username)) throw new HayloftError(ErrorCodes.LOCKED_OUT, 'locked', { retryAfter: 1 });
    },
    loginFailed: (username) => void failures.push(username),
    loginSucceeded: (username) => void successes.push(username),
  };
  return { server: new ScramServer(users, clock), clock, failures, successes, locked };
}

async function code(t: Tap, f: () => unknown, want: string, what: string): Promise<void> {
  try {
    await f();
    t.fail(`${what}: should fail with ${want}`);
  } catch (e) {
    t.equal((e as HayloftError).code, want, what);
  }
}
type Tap = Test;

t.test('a full handshake: the proof checks, the server signature is what the client expects', async (t) => {
  const { server, successes } = world();
  const { handshakeToken } = server.hello('user', '127.0.0.1');
  const c = new TestScramClient('user', 'pencil', 'rOprNGfwEbeRWgbNEkqO');
  const { serverFirst } = await server.clientFirst(handshakeToken, c.first());
  t.match(serverFirst, /^r=rOprNGfwEbeRWgbNEkqO[^,]+,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096$/, 'server-first: client nonce extended, salt and iterations');
  const done = server.clientFinal(handshakeToken, c.final(serverFirst));
  t.equal(done.userId, 'u1');
  t.equal(done.serverFinal, `v=${c.serverSignature}`, 'server-final carries the signature the client computed');
  t.same(successes, ['user'], 'a success clears the lockout');
});

t.test('wrong password, unknown user: HL_AUTH_FAILED, counted for the lockout', async (t) => {
  const { server, failures } = world();
  for (const [user, pw] of [
    ['user', 'pencil2'],
    ['nobody', 'pencil'],
  ] as const) {
    const { handshakeToken } = server.hello(user, '127.0.0.1');
    const c = new TestScramClient(user, pw, 'abcdefgh');
    const { serverFirst } = await server.clientFirst(handshakeToken, c.first());
    await code(t, () => server.clientFinal(handshakeToken, c.final(serverFirst)), ErrorCodes.AUTH_FAILED, `${user}/${pw} refused`);
  }
  t.same(failures, ['user', 'nobody']);
});

t.test('an unknown user gets the same kind of server-first message (no enumeration)', async (t) => {
  const { server } = world();
  const { handshakeToken } = server.hello('nobody', '127.0.0.1');
  const { serverFirst } = await server.clientFirst(handshakeToken, new TestScramClient('nobody', 'x', 'n1').first());
  t.match(serverFirst, /^r=n1[^,]+,s=[A-Za-z0-9+/=]+,i=\d+$/);
});

t.test('replayed, tampered and reordered messages are refused', async (t) => {
  const { server } = world();
  const c = new TestScramClient('user', 'pencil', 'nonce-1');
  const { handshakeToken } = server.hello('user', '127.0.0.1');
  const { serverFirst } = await server.clientFirst(handshakeToken, c.first());
  const final = c.final(serverFirst);
  // Tampered: another nonce, another channel binding, a flipped proof bit. Each consumes the handshake.
  for (const i of [0, 1, 2]) {
    const h = server.hello('user', '127.0.0.1');
    const c2 = new TestScramClient('user', 'pencil', 'nonce-1');
    const first = await server.clientFirst(h.handshakeToken, c2.first());
    const good = c2.final(first.serverFirst);
    const bad = i === 0 ? good.replace(/r=nonce-1/, 'r=nonce-2') : i === 1 ? good.replace('c=biws', 'c=eSws') : good.replace(/p=(.)/, (_m, ch: string) => `p=${ch === 'A' ? 'B' : 'A'}`);
    t.not(bad, good, `tampering ${i} changed the message`);
    await code(t, () => server.clientFinal(h.handshakeToken, bad), ErrorCodes.AUTH_FAILED, `tampered message ${i} refused`);
    await code(t, () => server.clientFinal(h.handshakeToken, good), ErrorCodes.UNAUTHORIZED, `after a refusal the handshake is gone (${i})`);
  }
  // The good one works once; replayed, it finds no handshake.
  t.equal(server.clientFinal(handshakeToken, final).userId, 'u1');
  await code(t, () => server.clientFinal(handshakeToken, final), ErrorCodes.UNAUTHORIZED, 'a replayed client-final message is refused');
  // A client-first message replayed on a used token, and a final message before the first.
  await code(t, () => server.clientFirst(handshakeToken, c.first()), ErrorCodes.UNAUTHORIZED, 'a replayed client-first message is refused');
  const h3 = server.hello('user', '127.0.0.1');
  await code(t, () => server.clientFinal(h3.handshakeToken, final), ErrorCodes.UNAUTHORIZED, 'a final message before the first is refused');
  // The user name of the first message must be the one of HELLO.
  const h4 = server.hello('user', '127.0.0.1');
  await code(t, () => server.clientFirst(h4.handshakeToken, 'n,,n=other,r=abc'), ErrorCodes.AUTH_FAILED, 'another user name is refused');
  const h5 = server.hello('user', '127.0.0.1');
  await code(t, () => server.clientFirst(h5.handshakeToken, 'p=tls-unique,,n=user,r=abc'), ErrorCodes.AUTH_FAILED, 'channel binding is refused');
});

t.test('an expired handshake is refused', async (t) => {
  const { server, clock } = world();
  const c = new TestScramClient('user', 'pencil', 'late');
  const { handshakeToken } = server.hello('user', '127.0.0.1');
  const { serverFirst } = await server.clientFirst(handshakeToken, c.first());
  clock.advanceMonotonic(HANDSHAKE_TTL_MS + 1);
  await code(t, () => server.clientFinal(handshakeToken, c.final(serverFirst)), ErrorCodes.UNAUTHORIZED, 'too late');
});

t.test('a locked-out user cannot start nor finish', async (t) => {
  const { server, locked } = world();
  const c = new TestScramClient('user', 'pencil', 'lock');
  const { handshakeToken } = server.hello('user', '127.0.0.1');
  const { serverFirst } = await server.clientFirst(handshakeToken, c.first());
  locked.add('user');
  await code(t, () => server.clientFinal(handshakeToken, c.final(serverFirst)), ErrorCodes.LOCKED_OUT, 'finish refused while locked');
  await code(t, () => server.hello('user', '127.0.0.1'), ErrorCodes.LOCKED_OUT, 'HELLO refused while locked');
});
