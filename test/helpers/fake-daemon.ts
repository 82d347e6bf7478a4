// Servers on 127.0.0.1 standing in for git daemon, for what a real one does not do (speak only
// protocol v0, never answer, hang up between questions).
import { createServer, type AddressInfo, type Server, type Socket } from 'node:net';

export interface FakeDaemons {
  /** A server doing `onConnection` with each connection; its git:// URI. */
  start(onConnection: (socket: Socket) => void): Promise<string>;
  /** Closes every server started (after each test). */
  closeAll(): void;
}

export function fakeDaemons(): FakeDaemons {
  const servers: Server[] = [];
  return {
    async start(onConnection) {
      const server = createServer(onConnection);
      servers.push(server);
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      return `git://127.0.0.1:${(server.address() as AddressInfo).port}/locks.git`;
    },
    closeAll() {
      for (const server of servers.splice(0)) server.close();
    },
  };
}
