#!/usr/bin/env node
// `npm run binary`: writes build/binary/pool-resource, one Linux executable holding Node and the
// resource (Node's single executable application support): check, in, out and pool, chosen by
// the name it is called as or by its first argument, and git's SSH program (first argument
// `ssh`). Beside it, the links check, in, out and pool. A machine needs only git (and glibc and
// libstdc++, as Node's own builds do) to run it.
//
//   node scripts/binary.mjs [--node PATH] [--no-code-cache] [--out DIR]
//
// The executable is a copy of the node that runs this script (or --node: the same version must
// make the blob and run it) with the bundle injected by postject. The bundle is
// dist/single-executable.js and what it imports, bundled by esbuild as CommonJS (what a single
// executable runs); ssh2's optional native parts stay out, as in the payload. V8's code cache
// of the bundle is stored with it (useCodeCache), so a start skips compiling it.
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { chmod, copyFile, mkdir, mkdtemp, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { build } from 'esbuild';
import { zodLocalesPlugin } from './package.mjs';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
export const EXECUTABLE = 'pool-resource';
export const LINKS = ['check', 'in', 'out', 'pool'];
const ENTRY = join(ROOT, 'dist', 'single-executable.js');
/** The fuse Node's single executable support looks for (Node's documentation, postject's). */
const SEA_FUSE = 'NODE_SEA_FUSE_fce680ab2cc467b6e072b8b5df1996b2';

/**
 * @param {{ outDir?: string, node?: string, codeCache?: boolean }} options
 * @returns {Promise<{ executable: string, bytes: number, node: string }>}
 */
export async function buildBinary(options = {}) {
  const outDir = resolve(options.outDir ?? join(ROOT, 'build', 'binary'));
  const node = options.node ?? process.execPath;
  if (!existsSync(ENTRY)) throw new Error(`${ENTRY} does not exist: run \`npm run build\` first`);

  await rm(outDir, { recursive: true, force: true });
  await mkdir(outDir, { recursive: true });
  const work = await mkdtemp(join(tmpdir(), 'pool-binary-'));
  try {
    return await inject(await bundleAt(work), work, outDir, node, options.codeCache ?? true);
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}

/** ssh2's optional native parts (the payload's NATIVE_OPTIONAL), as modules that fail to load. */
const nativeOptionalPlugin = {
  name: 'native-optional-absent',
  setup(pluginBuild) {
    const filter = /^cpu-features$|\.node$/;
    pluginBuild.onResolve({ filter }, (args) => ({
      path: args.path,
      namespace: 'native-optional',
    }));
    pluginBuild.onLoad({ filter: /.*/, namespace: 'native-optional' }, (args) => ({
      contents: `throw new Error(${JSON.stringify(`${args.path}: not in the single executable`)});`,
      loader: 'js',
    }));
  },
};

/**
 * The bundle's entry. Not a V8 start-up snapshot (useSnapshot): measured, it starts in 43 ms
 * against 73 ms with the code cache, but Node warns that child_process, http and tty are not
 * verified in snapshots (the resource lives on child processes), and ssh2 cannot be evaluated
 * while one is made (no WebAssembly then).
 */
const ENTRY_SOURCE = `import { start } from ${JSON.stringify(ENTRY)};
start(process.argv).catch((error) => {
  process.stderr.write(\`error: \${error instanceof Error ? error.message : String(error)}\\n\`);
  process.exitCode = 1;
});
`;

async function bundleAt(work) {
  const bundle = join(work, 'bundle.cjs');
  await build({
    absWorkingDir: ROOT,
    stdin: { contents: ENTRY_SOURCE, resolveDir: ROOT, sourcefile: 'executable.js' },
    outfile: bundle,
    bundle: true,
    format: 'cjs',
    platform: 'node',
    target: 'node20',
    // import() as require(): a single executable's main script has no import() once it carries
    // a code cache (Node 20: ERR_VM_DYNAMIC_IMPORT_CALLBACK_MISSING), and the resource loads
    // Node's HTTP(S) client with it (git/http-refs.ts).
    supported: { 'dynamic-import': false },
    minify: true,
    // Error classes and their names show up in messages; keep them readable.
    keepNames: true,
    legalComments: 'none',
    // A single executable's require() loads only Node's own modules and warns on stderr for
    // any other; ssh2 tries its native parts inside try/catch, so they become modules that throw.
    plugins: [zodLocalesPlugin, nativeOptionalPlugin],
    // The import.meta.url of src/git/ssh-command.ts and src/base/lazy-builtins.ts are read only
    // outside the executable.
    logOverride: { 'empty-import-meta': 'silent' },
    logLevel: 'warning',
  });
  return bundle;
}

async function inject(bundle, work, outDir, node, codeCache) {
  const blob = join(work, 'sea-prep.blob');
  const config = join(work, 'sea-config.json');
  await writeFile(
    config,
    JSON.stringify({
      main: bundle,
      output: blob,
      disableExperimentalSEAWarning: true,
      useCodeCache: codeCache,
    }),
  );
  // It says "Wrote single executable preparation blob to …" on stderr; failures throw with it.
  execFileSync(node, ['--experimental-sea-config', config], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });

  const executable = join(outDir, EXECUTABLE);
  await copyFile(node, executable);
  await chmod(executable, 0o755);
  execFileSync(
    process.execPath,
    [
      join(ROOT, 'node_modules', 'postject', 'dist', 'cli.js'),
      executable,
      'NODE_SEA_BLOB',
      blob,
      '--sentinel-fuse',
      SEA_FUSE,
    ],
    // postject's LIEF warns about every unnamed ELF note ("Can't find string offset"): noise.
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  for (const name of LINKS) await symlink(EXECUTABLE, join(outDir, name));
  return { executable, bytes: (await stat(executable)).size, node };
}

if (process.argv[1] && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) {
  const { values } = parseArgs({
    options: {
      node: { type: 'string' },
      out: { type: 'string' },
      'no-code-cache': { type: 'boolean' },
    },
  });
  const started = Date.now();
  const { executable, bytes, node } = await buildBinary({
    node: values.node,
    outDir: values.out,
    codeCache: !values['no-code-cache'],
  });
  const version = execFileSync(node, ['--version'], { encoding: 'utf8' }).trim();
  console.log(
    `${relative(process.cwd(), executable)}: Node ${version}, ${(bytes / 1e6).toFixed(0)} MB; links ${LINKS.join(', ')} [${((Date.now() - started) / 1000).toFixed(1)} s]`,
  );
}
