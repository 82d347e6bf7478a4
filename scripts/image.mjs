#!/usr/bin/env node
// `npm run image`: builds the Dockerfile with buildah (no daemon: `--isolation chroot`), which
// runs its unit tests and its end-to-end stage, then runs the image it made to check what it
// holds (scripts/image-check.mjs: node, git, CA certificates and the payload, nothing the
// Dockerfile rules out) and to take and give back a lock through /opt/resource, and reports its
// size.
//
//   npm run image -- [--tag pool-resource:VERSION] [--target runtime] [--base IMAGE]
//
// The Dockerfile's base (node:24-trixie-slim) is pulled when the registry is reachable. When it
// is not, a stand-in is committed under the same name: a Debian root filesystem holding Debian's
// nodejs, npm, git and ca-certificates (scripts/rootfs.mjs, made with mmdebstrap), labelled
// pool-resource.stand-in. Its node is Debian's (20 on trixie), not the official image's.
//
// Where TLS is intercepted, NODE_EXTRA_CA_CERTS (the CA file) reaches the build as the secret
// `ca`, used by npm in the build stage and never stored in a layer.
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { debianRootfs } from './rootfs.mjs';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const STAND_IN_LABEL = 'pool-resource.stand-in';
const STAND_IN_PACKAGES = ['nodejs', 'npm', 'git', 'ca-certificates'];
const PULL_TIMEOUT_MS = 120_000;

function run(command, args, { capture = false, timeoutMs } = {}) {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(command, args, {
      cwd: ROOT,
      stdio: ['ignore', capture ? 'pipe' : 'inherit', capture ? 'pipe' : 'inherit'],
      timeout: timeoutMs,
    });
    let stdout = '';
    let stderr = '';
    child.stdout?.on('data', (chunk) => (stdout += chunk));
    child.stderr?.on('data', (chunk) => (stderr += chunk));
    child.on('error', reject);
    child.on('close', (code) => resolvePromise({ code, stdout, stderr }));
  });
}

async function must(command, args, options) {
  const result = await run(command, args, options);
  if (result.code !== 0) {
    throw new Error(`${command} ${args.join(' ')} exited with ${result.code}\n${result.stderr}`);
  }
  return result.stdout.trim();
}

/** The base the Dockerfile asks for, from its ARG defaults. */
function dockerfileBase() {
  const text = readFileSync(join(ROOT, 'Dockerfile'), 'utf8');
  const args = Object.fromEntries(
    [...text.matchAll(/^ARG (\w+)=(\S+)$/gm)].map((match) => [match[1], match[2]]),
  );
  const base = (args.BASE_IMAGE ?? '').replace(/\$\{(\w+)\}/g, (_, name) => args[name] ?? '');
  if (!base) throw new Error('Dockerfile: no ARG BASE_IMAGE default');
  return base.includes('/') ? base : `docker.io/library/${base}`;
}

async function imageLabels(name) {
  const result = await run('buildah', ['inspect', '--type', 'image', name], { capture: true });
  if (result.code !== 0) return undefined;
  return JSON.parse(result.stdout).OCIv1?.config?.Labels ?? {};
}

/** Makes `name` available locally: the real image when it can be pulled, else a stand-in. */
async function ensureBase(name) {
  const labels = await imageLabels(name);
  if (labels && !labels[STAND_IN_LABEL]) return `${name} (local)`;
  // Always asks the registry: a local stand-in must not pass for the image.
  const pulled = await run('buildah', ['pull', '--quiet', '--policy', 'always', name], {
    capture: true,
    timeoutMs: PULL_TIMEOUT_MS,
  });
  if (pulled.code === 0) return `${name} (pulled)`;
  if (labels) return `${name}: stand-in (${labels[STAND_IN_LABEL]}), the registry is out of reach`;
  process.stderr.write(
    `image: cannot pull ${name} (${pulled.stderr.trim().split('\n').pop()}); making a stand-in from Debian packages\n`,
  );
  const tarball = await debianRootfs({ packages: STAND_IN_PACKAGES });
  const container = await must('buildah', ['from', 'scratch'], { capture: true });
  try {
    await must('buildah', ['add', container, tarball, '/']);
    const description = `Debian trixie ${STAND_IN_PACKAGES.join(' ')}`;
    await must('buildah', [
      'config',
      '--env',
      'PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
      '--cmd',
      'node',
      '--label',
      `${STAND_IN_LABEL}=${description}`,
      container,
    ]);
    await must('buildah', ['commit', '--quiet', container, name], { capture: true });
  } finally {
    await run('buildah', ['rm', container], { capture: true });
  }
  return `${name}: stand-in (Debian trixie ${STAND_IN_PACKAGES.join(' ')}), the registry is out of reach`;
}

/** Runs `command` in a container of `image` (removed afterwards), image-check.mjs mounted. */
async function inContainer(image, command, capture = false) {
  const container = await must('buildah', ['from', '--quiet', image], { capture: true });
  try {
    return await run(
      'buildah',
      [
        'run',
        '--isolation',
        'chroot',
        '--network',
        'host',
        '--volume',
        `${join(ROOT, 'scripts', 'image-check.mjs')}:/tmp/image-check.mjs:ro`,
        container,
        '--',
        ...command,
      ],
      { capture },
    );
  } finally {
    await run('buildah', ['rm', container], { capture: true });
  }
}

function megabytes(bytes) {
  return `${(bytes / 1e6).toFixed(0)} MB`;
}

function seconds(since) {
  return `${((Date.now() - since) / 1000).toFixed(0)} s`;
}

async function main() {
  const { version } = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8'));
  const { values } = parseArgs({
    options: {
      tag: { type: 'string', default: `pool-resource:${version}` },
      target: { type: 'string' },
      base: { type: 'string' },
    },
  });
  const started = Date.now();
  const base = values.base ?? dockerfileBase();
  const baseNote = await ensureBase(base);
  console.log(`image: base ${baseNote} [${seconds(started)}]`);

  const buildStarted = Date.now();
  const ca = process.env.NODE_EXTRA_CA_CERTS;
  await must('buildah', [
    'bud',
    '--isolation',
    'chroot',
    '--network',
    'host',
    '--layers',
    '--build-arg',
    `BASE_IMAGE=${base}`,
    ...(ca && existsSync(ca) ? ['--secret', `id=ca,src=${ca}`] : []),
    ...(values.target ? ['--target', values.target] : []),
    '--tag',
    values.tag,
    '--file',
    'Dockerfile',
    '.',
  ]);
  console.log(`image: built ${values.tag} [${seconds(buildStarted)}]`);

  const config = JSON.parse(
    await must('buildah', ['inspect', '--type', 'image', values.tag], { capture: true }),
  ).OCIv1.config;
  const entrypoint = config.Entrypoint ?? [];
  let failed = entrypoint.length > 0;
  console.log(
    `${failed ? 'FAILED' : 'ok'}: entrypoint ${JSON.stringify(entrypoint)}, command ${JSON.stringify(config.Cmd ?? [])}`,
  );

  const checkStarted = Date.now();
  const checked = await inContainer(values.tag, ['node', '/tmp/image-check.mjs']);
  failed ||= checked.code !== 0;
  console.log(`image: checked [${seconds(checkStarted)}]`);

  // What a worker pulls (every layer, uncompressed; the base's are shared with other images on
  // the same base), and what the runtime's files take.
  const manifest = JSON.parse(
    JSON.parse(await must('buildah', ['inspect', '--type', 'image', values.tag], { capture: true }))
      .Manifest,
  );
  const layers = manifest.layers.map((layer) => layer.size);
  const files = await inContainer(values.tag, ['du', '-sxb', '/'], true);
  console.log(
    `image: ${values.tag} ${megabytes(layers.reduce((a, b) => a + b, 0))} in ${layers.length} layers (${layers.map(megabytes).join(' + ')}); files ${megabytes(Number(files.stdout.split(/\s/)[0]))} [${seconds(started)} in all]`,
  );
  if (failed) {
    console.log('image: the checks above failed');
    process.exitCode = 1;
  }
}

await main().catch((error) => {
  process.stderr.write(`image: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exitCode = 1;
});
