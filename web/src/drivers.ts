/**
 * The protocol drivers of the server (the `drivers` op): their connector markers, point tags and
 * features, so the console names no connector kind itself and shows a driver added on the server.
 */
import { type Row, type Session, refId, str } from './api.js';

export interface DriverKind {
  /** `modbus`, `bacnet`: the `proto` of discover. */
  readonly name: string;
  /** `Modbus`, `BACnet`. */
  readonly dis: string;
  /** The marker of its connectors (`modbusConn`). */
  readonly connTag: string;
  /** The Ref tag on its points naming their connector (`modbusConnRef`). */
  readonly refTag: string;
  /** The point tag of the address it reads (`modbusCur`). */
  readonly curTag: string;
  /** What it supports: cur, write, his, learn, discover, cov. */
  readonly features: ReadonlySet<string>;
}

/** The server's drivers, in its order. */
export async function loadDrivers(session: Session): Promise<DriverKind[]> {
  return (await session.get('drivers')).rows.map((r) => ({
    name: str(r.name),
    dis: str(r.dis) || str(r.name),
    connTag: str(r.connTag),
    refTag: str(r.refTag),
    curTag: str(r.curTag),
    features: new Set(typeof r.features === 'object' && r.features !== null && !Array.isArray(r.features) ? Object.keys(r.features) : []),
  }));
}

/** A filter matching every connector of these drivers (`modbusConn or bacnetConn`); undefined when there are none. */
export function connFilter(drivers: readonly DriverKind[]): string | undefined {
  return drivers.length === 0 ? undefined : drivers.map((d) => d.connTag).join(' or ');
}

/** The driver of a connector record. */
export function driverOf(drivers: readonly DriverKind[], conn: Row): DriverKind | undefined {
  return drivers.find((d) => conn[d.connTag] != null);
}

/** The id of the connector a point names, and its driver. */
export function connOfPoint(drivers: readonly DriverKind[], point: Row): string | undefined {
  const d = drivers.find((k) => point[k.refTag] != null);
  return d === undefined ? undefined : refId(point[d.refTag]);
}
