// Type-aware lint where it catches real bugs in async code, and the seams STYLE.md asks for.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

/** Every folder of src/, and the root modules (main, the entry glue) above them all. */
const FOLDERS = ['base', 'transport', 'git', 'lock', 'repo', 'protocol', 'run', 'commands', 'bin'];

/** One rule per folder: importing a folder not in its list, or a root module, is an error. */
function layerRules(allowed) {
  return Object.entries(allowed).map(([folder, may]) => ({
    files: [`src/${folder}/**/*.ts`],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          // The policy waits, retries and gives up; it never runs a program itself.
          paths:
            folder === 'lock' ? ['simple-git', 'ssh2', 'child_process', 'node:child_process'] : [],
          patterns: [
            {
              group: [
                ...FOLDERS.filter((other) => other !== folder && !may.includes(other)).flatMap(
                  (other) => [`../${other}/*`, `../../${other}/*`],
                ),
                '../*.js',
                '../../*.js',
              ],
              message: `src/${folder}/ may import only ${[folder, ...may].join(', ')} (eslint.config.js)`,
            },
          ],
        },
      ],
    },
  }));
}

export default tseslint.config(
  { ignores: ['dist/', 'build/', 'node_modules/', 'bench-results/'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    files: ['src/**/*.ts'],
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': 'error',
      '@typescript-eslint/switch-exhaustiveness-check': 'error',
      '@typescript-eslint/no-explicit-any': 'error',
      'no-console': 'error',
    },
  },
  // Folders are layers (CONTRIBUTING.md): each may import only the folders listed for it, so a
  // request goes down one way and nothing below reaches back up. The lock policy (lock/) sees no
  // git and no SSH at all: only its own vocabulary.
  ...layerRules({
    base: [],
    transport: ['base'],
    git: ['base', 'transport'],
    lock: ['base'],
    repo: ['base', 'git', 'lock'],
    protocol: ['base', 'transport'],
    run: ['base', 'git', 'lock', 'repo', 'protocol'],
    commands: ['base', 'git', 'lock', 'repo', 'protocol', 'run'],
  }),
  {
    files: ['**/*.mjs', '**/*.js', 'assets/*'],
    languageOptions: {
      globals: {
        process: 'readonly',
        console: 'readonly',
        Buffer: 'readonly',
        setTimeout: 'readonly',
        URL: 'readonly',
      },
    },
  },
);
