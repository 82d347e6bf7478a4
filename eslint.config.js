// Type-aware lint where it catches real bugs in async code, and the seams STYLE.md asks for.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

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
  {
    files: ['src/lock-pool.ts', 'src/lock-operation.ts', 'src/pool-state.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          paths: ['simple-git', 'ssh2', 'child_process', 'node:child_process'],
          patterns: ['**/git/git.js'],
        },
      ],
    },
  },
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
