// The payload `npm run package` writes (what the image puts in /opt/resource) works on its own:
// copied to a folder outside the repository, run with only node and git on PATH, it does the
// whole job and still stops cleanly on SIGTERM.
import { execFileSync } from 'node:child_process';
import {
  cp,
  mkdir,
  mkdtemp,
  readFile,
  readdir,
  rm,
  stat,
  symlink,
  writeFile,
} from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { packageResource } from '../../scripts/package.mjs';
import { runLockCycle } from '../helpers/lock-cycle.js';
import { createLockRepo, type LockRepo } from '../helpers/lock-repo.js';
import { runScript, startScript } from '../helpers/run-script.js';
import { generateKey, startSshd } from '../helpers/sshd.js';
import { source as lockSource } from '../helpers/source.js';

const REPOSITORY = resolve(import.meta.dirname, '../..');

let scratch: string;
let payload: string;
/** A PATH holding only `node` and `git`, as on the image. */
let env: Record<string, string>;
let repo: LockRepo | undefined;

beforeAll(async () => {
  scratch = await mkdtemp(join(tmpdir(), 'pool-package-'));
  const built = join(scratch, 'built');
  await packageResource({ outDir: built });
  // Moved after packaging: nothing in it may depend on where it was written.
  payload = join(scratch, 'opt', 'resource');
  await mkdir(join(scratch, 'opt'));
  await cp(built, payload, { recursive: true });
  await rm(built, { recursive: true });

  const bin = join(scratch, 'bin');
  await mkdir(bin);
  await symlink(process.execPath, join(bin, 'node'));
  await symlink(execFileSync('which', ['git'], { encoding: 'utf8' }).trim(), join(bin, 'git'));
  env = { PATH: bin, HOME: scratch };
}, 120_000);

afterAll(async () => {
  if (scratch) await rm(scratch, { recursive: true, force: true });
});

afterEach(async () => {
  await repo?.cleanup();
  repo = undefined;
});

async function filesUnder(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { withFileTypes: true, recursive: true });
  return entries
    .filter((entry) => entry.isFile())
    .map((entry) => join(entry.parentPath, entry.name).slice(dir.length + 1))
    .sort();
}

describe('the packaged resource', () => {
  it('holds the scripts as node executables and no node_modules', async () => {
    const files = await filesUnder(payload);
    // Every script of assets/ (check, in, out, and pool where it exists) as a node executable.
    const scripts = await readdir(resolve(REPOSITORY, 'assets'));
    expect(scripts).toEqual(expect.arrayContaining(['check', 'in', 'out']));
    for (const script of scripts) {
      expect(files).toContain(script);
      const text = await readFile(join(payload, script), 'utf8');
      expect(text.startsWith('#!/usr/bin/env node\n')).toBe(true);
      expect((await stat(join(payload, script))).mode & 0o111).toBe(0o111);
    }
    expect(files.some((file) => file.includes('node_modules'))).toBe(false);
    for (const file of files) {
      // No path of the machine that built it (it is copied into an image).
      expect(await readFile(join(payload, file), 'utf8')).not.toContain(REPOSITORY);
    }
  });

  it('acquires, fetches, releases and checks a lock from a copy outside the repository', async () => {
    repo = await createLockRepo({
      pool: { unclaimed: { 'lock-a': '{"env":"a"}\n' } },
    });
    const source = lockSource(repo);
    const build = await mkdtemp(join(scratch, 'build-'));
    const run = (script: string, request: unknown, args: string[]) =>
      runScript(script, request, { assets: payload, args, env });

    const acquired = await run('out', { source, params: { acquire: true } }, [build]);
    expect(acquired.stderr).toContain('acquired!');
    expect(acquired.code).toBe(0);
    const acquiredRef = await repo.tip();
    expect(JSON.parse(acquired.stdout)).toEqual({
      version: { ref: acquiredRef },
      metadata: [
        { name: 'lock_name', value: 'lock-a' },
        { name: 'pool_name', value: 'pool' },
      ],
    });
    expect(await repo.state('pool')).toEqual({ claimed: ['lock-a'], unclaimed: [] });

    // The implicit get after the put writes the lock where the release step reads it.
    const fetched = await run('in', { source, version: { ref: acquiredRef } }, [
      join(build, 'lock'),
    ]);
    expect(fetched.code).toBe(0);
    expect(JSON.parse(fetched.stdout).version).toEqual({ ref: acquiredRef });
    expect(await readFile(join(build, 'lock', 'name'), 'utf8')).toBe('lock-a\n');
    expect(await readFile(join(build, 'lock', 'metadata'), 'utf8')).toBe('{"env":"a"}\n');

    const released = await run('out', { source, params: { release: 'lock' } }, [build]);
    expect(released.code).toBe(0);
    const releasedRef = await repo.tip();
    expect(JSON.parse(released.stdout).version).toEqual({ ref: releasedRef });
    expect(await repo.state('pool')).toEqual({ claimed: [], unclaimed: ['lock-a'] });

    const checked = await run('check', { source, version: { ref: acquiredRef } }, []);
    expect(checked.code).toBe(0);
    expect(JSON.parse(checked.stdout)).toEqual([{ ref: acquiredRef }, { ref: releasedRef }]);
  });

  it('loads none of node:crypto, node:http and node:zlib for an acquire, its get and the release', async () => {
    // Each costs every start that loads it (src/base/lazy-builtins.ts): these runs need none.
    // A preload notes the modules Node loaded by the time each script exits.
    repo = await createLockRepo({ pool: { unclaimed: ['lock-a'] } });
    const source = lockSource(repo);
    const build = await mkdtemp(join(scratch, 'build-'));
    const loaded = join(build, 'loaded');
    const preload = join(build, 'preload.cjs');
    await writeFile(
      preload,
      `process.on('exit', () => require('node:fs').appendFileSync(${JSON.stringify(loaded)}, process.moduleLoadList.join('\\n') + '\\n'));\n`,
    );
    const run = (script: string, request: unknown, args: string[]) =>
      runScript(script, request, {
        assets: payload,
        args,
        env: { ...env, NODE_OPTIONS: `--require ${preload}` },
      });

    const acquired = await run('out', { source, params: { acquire: true } }, [build]);
    expect(acquired.code).toBe(0);
    const version = JSON.parse(acquired.stdout).version;
    expect((await run('in', { source, version }, [join(build, 'lock')])).code).toBe(0);
    expect((await run('out', { source, params: { release: 'lock' } }, [build])).code).toBe(0);
    expect(await repo.state('pool')).toEqual({ claimed: [], unclaimed: ['lock-a'] });

    const modules = (await readFile(loaded, 'utf8')).split('\n');
    // Three runs noted what they loaded: the preload works, and the list names Node's modules.
    expect(modules.filter((module) => module === 'NativeModule child_process')).toHaveLength(3);
    expect(modules.filter((module) => /^NativeModule (crypto|http|zlib)$/.test(module))).toEqual(
      [],
    );
  });

  it('stops at once on SIGTERM while waiting for a lock', async () => {
    repo = await createLockRepo({ pool: { claimed: ['lock-a'] } });
    const source = lockSource(repo);
    const build = await mkdtemp(join(scratch, 'build-'));
    const running = startScript(
      'out',
      { source, params: { acquire: true } },
      { assets: payload, args: [build], env },
    );
    await running.waitForStderr(/waiting for lock/);
    const sent = Date.now();
    running.child.kill('SIGTERM');
    const result = await running.done;
    expect(result.code).toBe(143);
    expect(result.stdout).toBe('');
    // The packaged process is the one that got the signal: it stopped well inside the 10 s
    // Concourse allows before SIGKILL, and took nothing.
    expect(Date.now() - sent).toBeLessThan(5_000);
    expect(await repo.state('pool')).toEqual({ claimed: ['lock-a'], unclaimed: [] });
  });

  it('reaches an SSH lock repository with a private_key through its bundled ssh2', async () => {
    // The key reader is loaded on demand and git runs the payload's own SSH program: both only
    // happen over SSH, against a real sshd.
    const keys = await mkdtemp(join(scratch, 'keys-'));
    const key = await generateKey(keys, 'deploy', { type: 'ed25519' });
    const sshd = await startSshd([key.publicKey]);
    try {
      repo = await createLockRepo({ pool: { unclaimed: ['lock-a'] } });
      const source = lockSource(sshd.url(repo.bare), {
        private_key: key.privateKey,
        // Pinned: without it, the run warns that it accepted the host key unchecked.
        known_hosts: sshd.knownHostsLine,
      });
      await runLockCycle(source, repo, { assets: payload, env });
    } finally {
      await sshd.stop();
    }
  });

  it('answers bad requests word for word as the repository scripts do', async () => {
    // zod's own English messages (some lines quote them) must survive the bundling.
    const requests: [string, unknown][] = [
      ['check', {}],
      ['check', { source: { uri: 'x', branch: 'main', pool: 'p', retry_delay: true } }],
      ['in', { source: { uri: 'x', branch: 'main', pool: 'p' }, version: { ref: 'zz' } }],
      ['out', { source: { uri: 'x', branch: 'main', pool: 'p' }, params: { acquire: 'yes' } }],
      ['out', 'not json'],
      // The key reader (and ssh2) is a chunk of its own, loaded only for a key to read.
      [
        'check',
        {
          source: {
            uri: 'git@127.0.0.1:locks.git',
            branch: 'main',
            pool: 'p',
            private_key:
              '-----BEGIN OPENSSH PRIVATE KEY-----\nAAAA\n-----END OPENSSH PRIVATE KEY-----\n',
          },
        },
      ],
    ];
    const build = await mkdtemp(join(scratch, 'build-'));
    for (const [script, request] of requests) {
      const packaged = await runScript(script, request, { assets: payload, args: [build], env });
      const original = await runScript(script, request, {
        assets: resolve(REPOSITORY, 'assets'),
        args: [build],
        env,
      });
      expect(packaged.code).toBe(1);
      expect({ code: packaged.code, stderr: packaged.stderr, stdout: packaged.stdout }).toEqual({
        code: original.code,
        stderr: original.stderr,
        stdout: original.stdout,
      });
    }
  });

  it('refuses a bad request with one line per problem and no stack trace', async () => {
    const result = await runScript(
      'out',
      { source: { uri: 'x', branch: 'master' }, params: {} },
      {
        assets: payload,
        args: [await mkdtemp(join(scratch, 'build-'))],
        env,
      },
    );
    expect(result.code).toBe(1);
    expect(result.stdout).toBe('');
    expect(result.stderr).toContain('invalid payload (missing pool)');
    expect(result.stderr).not.toMatch(/\n\s+at /);
  });
});

describe('packaging', () => {
  it('keeps programs findable from import.meta.url and bundles ssh2 without its native parts', async () => {
    // A small project shaped like this one: a script, its entry in dist/bin/, a module in
    // dist/git/ that finds another program of dist/bin/ relative to itself (as the SSH command
    // is found), a CommonJS dependency using require and __dirname, and the real ssh2.
    const root = await mkdtemp(join(scratch, 'project-'));
    await symlink(join(REPOSITORY, 'node_modules'), join(root, 'node_modules'));
    await writeFile(join(root, 'package.json'), '{"name": "probe", "version": "1.0.0"}\n');
    await mkdir(join(root, 'assets'));
    await writeFile(
      join(root, 'assets', 'probe'),
      "#!/usr/bin/env node\nimport '../dist/bin/probe.js';\n",
    );
    await mkdir(join(root, 'dist', 'bin'), { recursive: true });
    await mkdir(join(root, 'dist', 'git'));
    await mkdir(join(root, 'dist', 'vendor'));
    await writeFile(
      join(root, 'dist', 'git', 'locate.js'),
      "import { fileURLToPath } from 'node:url';\n" +
        "export const helper = fileURLToPath(new URL('../bin/helper.js', import.meta.url));\n",
    );
    await writeFile(
      join(root, 'dist', 'bin', 'helper.js'),
      "process.stdout.write('helper ran');\n",
    );
    await writeFile(
      join(root, 'dist', 'vendor', 'legacy.cjs'),
      "const path = require('node:path');\nmodule.exports = path.basename(__dirname);\n",
    );
    await writeFile(
      join(root, 'dist', 'bin', 'probe.js'),
      [
        "import { execFileSync } from 'node:child_process';",
        "import ssh2 from 'ssh2';",
        "import legacy from '../vendor/legacy.cjs';",
        "import { helper } from '../git/locate.js';",
        // Drawn again when unreadable, as test/helpers/ssh2-keys.ts explains.
        'let key;',
        "do key = ssh2.utils.parseKey(ssh2.utils.generateKeyPairSync('ed25519').private);",
        'while (key instanceof Error);',
        'const ran = execFileSync(process.execPath, [helper], { encoding: "utf8" });',
        'console.log(JSON.stringify({ helper, ran, key: key.type, legacy, client: typeof ssh2.Client }));',
      ].join('\n'),
    );

    const out = join(scratch, 'probe-payload');
    const { entries } = await packageResource({ root, outDir: out });
    expect(entries.sort()).toEqual(['bin/helper.js', 'bin/probe.js']);
    const moved = join(scratch, 'elsewhere');
    await cp(out, moved, { recursive: true });
    await rm(out, { recursive: true });

    const result = await runScript('probe', '', { assets: moved, env });
    expect(result.stderr).toBe('');
    expect(JSON.parse(result.stdout)).toEqual({
      helper: join(moved, 'bin', 'helper.js'),
      ran: 'helper ran',
      key: 'ssh-ed25519',
      // __dirname of a bundled CommonJS module is the folder of the file it landed in.
      legacy: expect.stringMatching(/^(bin|lib)$/),
      client: 'function',
    });
    expect(await readFile(join(moved, 'THIRD-PARTY-NOTICES'), 'utf8')).toContain('ssh2@');
  });
});
