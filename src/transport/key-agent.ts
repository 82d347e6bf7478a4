// An SSH agent served in-process from the configured key, for `forward_agent: true`: the server
// (a jump host) can use the key through the forwarded channel while the key stays in memory
// here. No ssh-agent process, no socket file.
import {
  AgentProtocol,
  BaseAgent,
  type GetStreamCallback,
  type IdentityCallback,
  type ParsedKey,
  type SignCallback,
  type SigningRequestOptions,
} from 'ssh2';

export class KeyAgent extends BaseAgent<ParsedKey> {
  constructor(private readonly key: ParsedKey) {
    super();
  }

  getIdentities(cb: IdentityCallback<ParsedKey>): void {
    cb(undefined, [this.key]);
  }

  sign(
    pubKey: ParsedKey,
    data: Buffer,
    options: SigningRequestOptions | SignCallback,
    cb?: SignCallback,
  ): void {
    const done = typeof options === 'function' ? options : cb;
    const hash = typeof options === 'function' ? undefined : options?.hash;
    const signature = this.signWith(pubKey, data, hash);
    if (signature instanceof Error) done?.(signature);
    else done?.(undefined, signature);
  }

  /** The agent protocol over one forwarded channel (the server opened `auth-agent@openssh.com`). */
  override getStream(cb: GetStreamCallback): void {
    const protocol = new AgentProtocol(false);
    protocol.on('identities', (request) => protocol.getIdentitiesReply(request, [this.key]));
    protocol.on('sign', (request, pubKey, data, options) => {
      const signature = this.signWith(pubKey, data, options.hash);
      if (signature instanceof Error) protocol.failureReply(request);
      else protocol.signReply(request, signature);
    });
    cb(undefined, protocol);
  }

  private signWith(pubKey: ParsedKey, data: Buffer, hash: string | undefined): Buffer | Error {
    // ssh2's `equals` also compares private parts; the request carries only the public key.
    if (!this.key.getPublicSSH().equals(pubKey.getPublicSSH())) return new Error('unknown key');
    // ssh2's typing says Buffer, but a failed signature comes back as an Error value.
    return this.key.sign(data, hash) as Buffer | Error;
  }
}
