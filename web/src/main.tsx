/**
 * The console's shell: the session, the login form when there is none, the navigation bar and
 * the page named by the URL's hash (`#/points`, `#/point/<id>`, ...). Hash routes keep every
 * page at `/` for the server, so it needs no fallback route.
 */
import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { Session } from './api.js';
import { Login } from './pages/login.js';
import { Tree } from './pages/tree.js';
import { PointPage } from './pages/point.js';
import { Connectors } from './pages/connectors.js';
import { System } from './pages/system.js';
import { Edit } from './pages/edit.js';
import { Discovery } from './pages/discovery.js';
import { AlarmBanner, Alarms, useAlarmCounts } from './pages/alarms.js';
import { Schedules } from './pages/schedules.js';
import { Bacnet } from './pages/bacnet.js';
import './style.css';

const PAGES = [
  ['points', 'Points'],
  ['alarms', 'Alarms'],
  ['connectors', 'Connectors'],
  ['schedules', 'Schedules'],
  ['discovery', 'Discovery'],
  ['bacnet', 'BACnet'],
  ['edit', 'Edit'],
  ['system', 'System'],
] as const;

function useHash(): string {
  const [hash, setHash] = useState(location.hash);
  useEffect(() => {
    const on = (): void => setHash(location.hash);
    addEventListener('hashchange', on);
    return () => removeEventListener('hashchange', on);
  }, []);
  return hash;
}

function App({ session }: { session: Session }) {
  const [, setTick] = useState(0);
  const hash = useHash();
  useEffect(() => {
    session.onEnd = () => setTick((n) => n + 1);
  }, [session]);
  if (!session.loggedIn) return <Login session={session} onDone={() => setTick((n) => n + 1)} />;
  return <Shell session={session} hash={hash} onChange={() => setTick((n) => n + 1)} />;
}

function Shell({ session, hash, onChange }: { session: Session; hash: string; onChange: () => void }) {
  const alarms = useAlarmCounts(session);
  const [name, ...rest] = hash.replace(/^#\/?/, '').split('/');
  const page = name || 'points';
  const arg = rest.map(decodeURIComponent).join('/');
  let body;
  switch (page) {
    case 'point':
      body = <PointPage session={session} id={arg} key={arg} />;
      break;
    case 'connectors':
      body = <Connectors session={session} />;
      break;
    case 'discovery':
      body = <Discovery session={session} />;
      break;
    case 'edit':
      body = <Edit session={session} id={arg} key={arg} />;
      break;
    case 'alarms':
      body = <Alarms session={session} />;
      break;
    case 'schedules':
      body = <Schedules session={session} />;
      break;
    case 'bacnet':
      body = <Bacnet session={session} />;
      break;
    case 'system':
      body = <System session={session} onImpersonate={onChange} />;
      break;
    default:
      body = <Tree session={session} />;
  }
  const current = page === 'point' ? 'points' : page;
  return (
    <>
      <header class="bar">
        <span class="brand">Hayloft</span>
        <nav>
          {PAGES.map(([p, label]) => (
            <a href={`#/${p}`} class={current === p ? 'on' : ''} aria-current={current === p ? 'page' : undefined}>
              {label}
              {p === 'alarms' && alarms !== undefined && alarms.active > 0 && (
                <span class="nav-badge" aria-label={`${alarms.active} active`}>
                  {alarms.active}
                </span>
              )}
            </a>
          ))}
        </nav>
        <span class="who">
          {session.impersonating !== undefined ? <strong class="acting">as {session.impersonating.name}</strong> : session.username}
          <button type="button" class="link" onClick={() => void session.logout()}>
            Log out
          </button>
        </span>
      </header>
      {page !== 'alarms' && <AlarmBanner counts={alarms} />}
      <main>{body}</main>
    </>
  );
}

const root = document.getElementById('app');
if (root !== null) render(<App session={new Session()} />, root);
