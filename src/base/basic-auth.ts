// HTTP basic auth's credentials as they travel (RFC 7617: base64 of `user:password`), in one
// place: the HTTP(S) relay and the SSH proxy tunnel send them, and the logger masks them should
// anything echo a header back.

/** base64 of `user:password`, a missing part empty; undefined when neither is set. */
export function basicCredentials(
  user: string | undefined,
  password: string | undefined,
): string | undefined {
  if (user === undefined && password === undefined) return undefined;
  return Buffer.from(`${user ?? ''}:${password ?? ''}`).toString('base64');
}
