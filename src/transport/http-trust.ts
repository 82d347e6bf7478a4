// The certificate authorities the relay trusts for an https:// lock repository: the ones git would
// trust, so that the relay serves wherever git can connect. git (libcurl) reads the file that
// `http.sslCAInfo` names, and otherwise the system's bundle, where the distribution keeps it
// (Debian's: /etc/ssl/certs/ca-certificates.crt, the folder a Concourse worker mounts its own
// certificates over). Node, left to itself, trusts only the list it was built with: a server whose
// certificate a company's own authority signed failed the relay's handshake, and every run went on
// without the relay.
import { readFile } from 'node:fs/promises';

/** Where Linux distributions keep the system's bundle of authorities, in the order looked for. */
export const SYSTEM_BUNDLES: readonly string[] = [
  '/etc/ssl/certs/ca-certificates.crt', // Debian, Ubuntu, Arch, Gentoo
  '/etc/pki/tls/certs/ca-bundle.crt', // Fedora, RHEL
  '/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem', // CentOS, RHEL 7
  '/etc/ssl/ca-bundle.pem', // openSUSE
  '/etc/ssl/cert.pem', // Alpine
];

/** Whether a git_config entry is `http.sslCAInfo` (any case, as git reads names). */
export function isCaInfo(name: string): boolean {
  return /^http\.sslcainfo$/i.test(name);
}

/** The file git_config's `http.sslCAInfo` names (the last one, as git reads them), if any. */
export function caInfoOf(
  gitConfig: readonly { name: string; value: string }[],
): string | undefined {
  return gitConfig.filter(({ name }) => isCaInfo(name)).at(-1)?.value;
}

/**
 * The authorities to trust, as PEM: the file `caInfo` names, else the first system bundle that can
 * be read; undefined when there is none (Node's own list then). A `caInfo` that cannot be read
 * rejects, as git fails on it.
 */
export async function trustedAuthorities(
  caInfo: string | undefined,
  bundles: readonly string[] = SYSTEM_BUNDLES,
): Promise<string | undefined> {
  if (caInfo !== undefined) return readFile(caInfo, 'utf8');
  for (const bundle of bundles) {
    const text = await readFile(bundle, 'utf8').catch(() => undefined);
    if (text?.includes('-----BEGIN CERTIFICATE-----')) return text;
  }
  return undefined;
}
