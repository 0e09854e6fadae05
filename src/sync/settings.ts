/**
 * What the uplink needs of its configuration. The config layer's UplinkConfig (src/config/uplink.ts,
 * where each key is documented and checked) has this shape; sync may not import config
 * (docs/design/README.md dependency direction), so the shape is restated here and the composition root
 * hands one to the other.
 */
export interface UplinkSettings {
  readonly name: string;
  readonly url: string;
  readonly clientId: string;
  readonly clientSecret: string;
  readonly username: string | null;
  readonly password: string | null;
  readonly refreshToken: string | null;
  readonly filter: string;
  readonly createMissing: boolean;
  readonly updateTags: boolean;
  readonly batchSamples: number;
  readonly batchPoints: number;
  readonly scanIntervalMs: number;
  readonly retryMinMs: number;
  readonly retryMaxMs: number;
  readonly timeoutMs: number;
}
