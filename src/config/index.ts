/**
 * src/config: the configuration schema (keys, defaults, checks), loading from an optional JSON
 * or YAML file plus environment overrides, and validation that reports every problem at once.
 */
export { CONFIG_KEYS, type Config, type ConfigKey, LOG_LEVELS, type LogLevel, SCHEMA, type ZoneLookup } from './schema.js';
export { CONFIG_ENV, type ConfigProblem, type LoadConfigOptions, formatProblems, loadConfig } from './load.js';
export { type UplinkConfig, UPLINK_ENV, UPLINK_KEYS, redactUplink } from './uplink.js';
export { type DeviceBy, type MqttConfig, MQTT_ENV, MQTT_KEYS, redactMqtt } from './mqtt.js';
export { type BacnetDeviceConfig, BACNET_DEVICE_KEYS, redactBacnetDevice } from './bacnet-device.js';
export { type SmtpConfig, SMTP_ENV, SMTP_KEYS, redactSmtp } from './smtp.js';
