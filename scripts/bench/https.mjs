// @ts-check
// Over HTTPS at a distance: the operations through a TCP proxy that puts the server a 50 ms round
// trip away (every byte 25 ms late each way, and each new connection a round trip late, as its
// TCP handshake would be), once as the resource runs (one connection per run, through its relay)
// and once with git connecting on its own for each command, as an `http.*` entry in git_config
// makes it do. Both again behind an HTTP proxy on the worker's side (https_proxy: a CONNECT
// tunnel per connection, each tunnel a new connection to the server). The four take turns round
// by round, so they compare within one run; then the contention run, without the proxy, in each
// mode.
import { join } from 'node:path';
import { startConnectProxy } from '../../test/helpers/connect-proxy.mjs';
import { startHttpGit } from '../../test/helpers/http-git.mjs';
import { startTcpProxy } from '../../test/helpers/tcp-proxy.mjs';
import { measureContention } from './contention.mjs';
import { measureRound, setupSize, summarise } from './operations.mjs';
import { opts, reps } from './options.mjs';
import { HTTP_LOGIN, pushesOf, requestsOf } from './servers.mjs';

export const HTTPS_COMMITS = 100;
export const RTT_MS = 50;

export const HTTPS_MODES = {
  relayed: 'one connection per run',
  perCommand: 'one connection per git command',
  proxiedRelayed: 'behind a proxy, one tunnel per run',
  proxiedPerCommand: 'behind a proxy, one tunnel per git command',
};

export async function measureHttps(root) {
  const base = join(root, 'repos');
  const http = await startHttpGit({ projectRoot: base, ...HTTP_LOGIN, tls: true });
  const proxy = await startTcpProxy(http.port);
  proxy.setLatency(RTT_MS / 2);
  proxy.setConnectDelay(RTT_MS);
  const worksProxy = await startConnectProxy();
  const proxied = { https_proxy: `http://127.0.0.1:${worksProxy.port}` };
  const server = {
    url: (name) => `https://127.0.0.1:${proxy.port}/${name}`,
    connections: () => proxy.connections(),
    pushes: () => pushesOf(http),
    requests: () => requestsOf(http),
  };
  try {
    const extras = {
      relayed: { ...HTTP_LOGIN, skip_ssl_verification: true },
      perCommand: {
        ...HTTP_LOGIN,
        skip_ssl_verification: true,
        // git's default, so it changes nothing but who connects.
        git_config: [{ name: 'http.lowSpeedLimit', value: '0' }],
      },
    };
    const modes = {
      relayed: await setupSize(root, server, HTTPS_COMMITS, {
        name: 'https-relayed.git',
        sourceExtra: extras.relayed,
      }),
      perCommand: await setupSize(root, server, HTTPS_COMMITS, {
        name: 'https-per-command.git',
        sourceExtra: extras.perCommand,
      }),
      proxiedRelayed: await setupSize(root, server, HTTPS_COMMITS, {
        name: 'https-proxied-relayed.git',
        sourceExtra: extras.relayed,
        env: proxied,
      }),
      proxiedPerCommand: await setupSize(root, server, HTTPS_COMMITS, {
        name: 'https-proxied-per-command.git',
        sourceExtra: extras.perCommand,
        env: proxied,
      }),
    };
    for (let rep = 0; rep < reps; rep++) {
      process.stderr.write(
        `over HTTPS at a ${RTT_MS} ms round trip, round ${rep + 1} of ${reps}…\n`,
      );
      await measureRound(root, server, Object.values(modes), rep, { floors: false });
    }
    const result = {
      commits: HTTPS_COMMITS,
      rttMs: RTT_MS,
      operations: Object.fromEntries(Object.entries(modes).map(([k, m]) => [k, summarise(m)])),
    };
    if (!opts['no-contention']) {
      result.contention = {};
      for (const key of ['perCommand', 'relayed']) {
        process.stderr.write(`contention over HTTPS at a distance, ${HTTPS_MODES[key]}…\n`);
        result.contention[key] = await measureContention(root, server, {
          name: `contention-https-${key}.git`,
          extra: extras[key],
        });
      }
    }
    return result;
  } finally {
    await worksProxy.stop();
    await proxy.stop();
    await http.stop();
  }
}
