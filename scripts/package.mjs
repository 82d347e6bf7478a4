// Writes build/resource/: the self-contained payload the image installs at /opt/resource. It needs
// only `node` and `git` on the machine: our compiled code and its dependencies are bundled, so no
// node_modules comes along. `npm run package` builds first; this script bundles what dist/ holds.
//
// Layout (mirrors dist/ one folder deep, so a module that finds a sibling program through
// `import.meta.url` finds it here too):
//   check in out pool   the scripts from assets/, importing ./bin/*.js instead of ../dist/bin/*.js
//   bin/*.js            the programs: one per script, and those git starts by path (ssh)
//   lib/*.js            code shared by the entries
//   package.json        {"type": "module"}: the extensionless scripts and lib/*.js are ES modules
//   THIRD-PARTY-NOTICES the licences of the bundled packages
import { build } from 'esbuild';
import { chmod, cp, mkdir, readFile, readdir, rm, stat, writeFile } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');

/**
 * Where the programs are, relative to dist/: every `.js` file directly in one of these folders is
 * bundled as an entry point. bin/ holds the scripts' entries (check, in, out, pool) and the
 * programs git starts by path (ssh: GIT_SSH_COMMAND). Add a folder here for programs kept
 * elsewhere; the files that assets/ scripts import are entries in any case.
 */
export const PROGRAM_FOLDERS = ['bin'];

/** ssh2's optional native parts: it falls back to pure JavaScript when they cannot be loaded. */
const NATIVE_OPTIONAL = ['cpu-features', '*.node'];

/** Every `../dist/X.js` that an assets/ script imports. */
async function assetEntries(assetsDir) {
  const scripts = [];
  for (const name of (await readdir(assetsDir)).sort()) {
    const text = await readFile(join(assetsDir, name), 'utf8');
    const targets = [...text.matchAll(/(['"])\.\.\/dist\/([^'"]+\.js)\1/g)].map((m) => m[2]);
    if (!text.startsWith('#!/usr/bin/env node\n') || targets.length === 0) {
      throw new Error(`assets/${name} must be a node script importing ../dist/…`);
    }
    scripts.push({ name, text, targets });
  }
  return scripts;
}

/**
 * esbuild keeps `import.meta.url` as the URL of the output file a module lands in. Every output
 * file sits one folder below the payload's root (bin/, lib/), so the URL a module
 * would have in dist/ is the same path relative to that root: rewrite it to that.
 */
function distUrlPlugin(distDir) {
  return {
    name: 'dist-import-meta-url',
    setup(pluginBuild) {
      const filter = new RegExp(
        `^${distDir.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}[\\\\/].*\\.js$`,
      );
      pluginBuild.onLoad({ filter }, async (args) => {
        const contents = await readFile(args.path, 'utf8');
        if (!contents.includes('import.meta.url')) return undefined;
        const asInDist = `../${relative(distDir, args.path).split(sep).join('/')}`;
        return {
          contents: contents.replaceAll(
            'import.meta.url',
            `new URL(${JSON.stringify(asInDist)}, import.meta.url).href`,
          ),
          loader: 'js',
          resolveDir: dirname(args.path),
        };
      });
    },
  };
}

/**
 * zod re-exports every translation of its messages as `z.locales`; the resource only ever shows the
 * English ones (which zod loads on its own), so the others are left out: two thirds of its size.
 */
export const zodLocalesPlugin = {
  name: 'zod-without-locales',
  setup(pluginBuild) {
    pluginBuild.onResolve({ filter: /^\.\.\/locales\/index\.js$/ }, (args) =>
      /[\\/]zod[\\/]/.test(args.importer)
        ? { path: 'zod-locales', namespace: 'zod-without-locales' }
        : undefined,
    );
    pluginBuild.onLoad({ filter: /.*/, namespace: 'zod-without-locales' }, () => ({
      contents: 'export {};',
      loader: 'js',
    }));
  },
};

async function licenceNotices(root, metafile) {
  const packages = new Map();
  for (const input of Object.keys(metafile.inputs)) {
    const match = /(?:^|\/)node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(input);
    if (!match) continue;
    const dir = join(root, input.slice(0, match.index + match[0].length));
    packages.set(match[1], dir);
  }
  const sections = [];
  for (const [name, dir] of [...packages].sort(([a], [b]) => a.localeCompare(b))) {
    const { version, license } = JSON.parse(await readFile(join(dir, 'package.json'), 'utf8'));
    const file = (await readdir(dir)).find((f) => /^(licen[cs]e|copying)(\.|$)/i.test(f));
    const text = file ? (await readFile(join(dir, file), 'utf8')).trim() : `License: ${license}`;
    sections.push(`${name}@${version} (${license})\n\n${text}\n`);
  }
  return `This payload bundles the following packages.\n\n${sections.join('\n---\n\n')}`;
}

async function folderSize(dir) {
  let bytes = 0;
  for (const entry of await readdir(dir, { withFileTypes: true, recursive: true })) {
    if (entry.isFile()) bytes += (await stat(join(entry.parentPath, entry.name))).size;
  }
  return bytes;
}

/**
 * Bundles dist/ (built by `npm run build`) into `outDir`. Returns the payload's files and size.
 * @param {{ outDir?: string, root?: string }} options
 */
export async function packageResource(options = {}) {
  const root = options.root ?? ROOT;
  const outDir = resolve(options.outDir ?? join(root, 'build', 'resource'));
  const distDir = join(root, 'dist');
  const scripts = await assetEntries(join(root, 'assets'));
  const entries = new Set(scripts.flatMap((script) => script.targets));
  for (const folder of PROGRAM_FOLDERS) {
    if (!existsSync(join(distDir, folder))) continue;
    for (const file of (await readdir(join(distDir, folder))).sort()) {
      if (file.endsWith('.js')) entries.add(`${folder}/${file}`);
    }
  }
  for (const entry of entries) {
    if (!existsSync(join(distDir, entry))) {
      throw new Error(`dist/${entry} does not exist: run \`npm run build\` first`);
    }
    if (entry.split('/').length !== 2) {
      // The import.meta.url rewrite relies on every output file being one folder deep.
      throw new Error(`dist/${entry}: programs must live one folder below dist/ (e.g. bin/x.js)`);
    }
  }

  await rm(outDir, { recursive: true, force: true });
  await mkdir(outDir, { recursive: true });
  const result = await build({
    absWorkingDir: root,
    entryPoints: [...entries].map((entry) => ({
      in: join(distDir, entry),
      out: entry.replace(/\.js$/, ''),
    })),
    outdir: outDir,
    bundle: true,
    splitting: true,
    format: 'esm',
    platform: 'node',
    target: 'node20',
    chunkNames: 'lib/[name]-[hash]',
    minify: true,
    // Error classes and their names show up in messages; keep them readable.
    keepNames: true,
    legalComments: 'none',
    external: NATIVE_OPTIONAL,
    // The bundled CommonJS packages (simple-git, ssh2) call require() and read __dirname /
    // __filename: give every output file its own (`define` touches only free references, so a
    // module that declares its own __dirname keeps it).
    banner: {
      js: [
        "import { createRequire as __poolCreateRequire } from 'node:module';",
        "import { fileURLToPath as __poolFileURLToPath } from 'node:url';",
        'const require = __poolCreateRequire(import.meta.url);',
        'const __poolFilename = __poolFileURLToPath(import.meta.url);',
        "const __poolDirname = __poolFilename.slice(0, __poolFilename.lastIndexOf('/'));",
      ].join(' '),
    },
    define: { __filename: '__poolFilename', __dirname: '__poolDirname' },
    plugins: [distUrlPlugin(distDir), zodLocalesPlugin],
    metafile: true,
    logLevel: 'warning',
  });

  for (const script of scripts) {
    const target = join(outDir, script.name);
    await writeFile(target, script.text.replaceAll('../dist/', './'));
    await chmod(target, 0o755);
  }
  const { version, license } = JSON.parse(await readFile(join(root, 'package.json'), 'utf8'));
  await writeFile(
    join(outDir, 'package.json'),
    `${JSON.stringify({ name: 'pool-resource', version, license, private: true, type: 'module' }, null, 2)}\n`,
  );
  await writeFile(join(outDir, 'THIRD-PARTY-NOTICES'), await licenceNotices(root, result.metafile));
  const licence = join(root, 'LICENSE');
  if (existsSync(licence)) await cp(licence, join(outDir, 'LICENSE'));

  return {
    outDir,
    scripts: scripts.map((script) => script.name),
    entries: [...entries],
    bytes: await folderSize(outDir),
  };
}

if (process.argv[1] && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) {
  const { outDir, scripts, entries, bytes } = await packageResource();
  console.log(
    `${relative(process.cwd(), outDir) || '.'}: scripts ${scripts.join(', ')}; programs ${entries.join(', ')}; ${(bytes / 1024).toFixed(0)} KiB`,
  );
}
