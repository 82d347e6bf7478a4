// The secret values of a request as sent, read before the request is parsed: a request that
// fails to parse never registers its secrets, yet a message about another field can quote one
// (a password pasted into retry_delay, say).
import { uriSecrets, userNameSecrets } from '../base/logger.js';

/** The values of the secret fields, whatever else is wrong with the request; [] if it is not JSON. */
export function requestSecrets(text: string): string[] {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    return [];
  }
  const field = (object: unknown, key: string): unknown =>
    typeof object === 'object' && object !== null && !Array.isArray(object)
      ? (object as Record<string, unknown>)[key]
      : undefined;
  const stringField = (object: unknown, key: string) => {
    const value = field(object, key);
    return typeof value === 'string' ? value : undefined;
  };
  const source = field(raw, 'source');
  const uri = field(source, 'uri');
  const gitConfig = field(source, 'git_config');
  // A proxy's URL in git_config (`http.proxy`, which the run's relay sends to the proxy too) may
  // carry its credentials.
  const proxyUris = (Array.isArray(gitConfig) ? gitConfig : []).flatMap((entry: unknown) => {
    const name = stringField(entry, 'name');
    const value = stringField(entry, 'value');
    return name !== undefined && value !== undefined && /(^|\.)proxy$/i.test(name) ? [value] : [];
  });
  return [
    field(source, 'private_key'),
    field(source, 'private_key_passphrase'),
    field(source, 'password'),
    field(field(source, 'https_tunnel'), 'proxy_password'),
    ...(typeof uri === 'string' ? uriSecrets(uri) : []),
    ...proxyUris.flatMap((proxy) => uriSecrets(proxy.includes('://') ? proxy : `http://${proxy}`)),
    ...userNameSecrets(stringField(source, 'username')),
  ].filter((value): value is string => typeof value === 'string');
}
