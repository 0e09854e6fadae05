// Lint policy: typescript-eslint's recommended rules with type information, plus a few that
// catch real bugs in a long-running daemon (floating promises, misused promises).
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/**', 'dist-all/**', 'dist-bench/**', 'dist-arm64/**', 'node_modules/**', 'coverage/**', '.tap/**', 'data/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: { projectService: { allowDefaultProject: ['*.js', '*.cjs', '*.mjs', 'scripts/*.mjs'] }, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/consistent-type-imports': 'error',
      'eqeqeq': ['error', 'always', { null: 'ignore' }],
      'no-constant-condition': ['error', { checkLoops: false }],
    },
  },
  {
    // node:http and polka (whose ES build imports node:http) are required through
    // src/api/node-http.ts: an ES import of node:http loads undici on Node 22+ (3 MiB idle).
    files: ['src/**/*.ts'],
    rules: {
      '@typescript-eslint/no-restricted-imports': ['error', {
        paths: ['node:http', 'http', 'polka'].map((name) => ({ name, allowTypeImports: true, message: 'take http and polka from src/api/node-http.ts (memory on Node 22+)' })),
      }],
    },
  },
  {
    // tap queues subtests itself: an un-awaited `t.test(...)` and an async callback without
    // `await` are its normal style, not mistakes.
    files: ['test/**/*.ts'],
    rules: {
      '@typescript-eslint/no-floating-promises': 'off',
      '@typescript-eslint/require-await': 'off',
    },
  },
  {
    files: ['**/*.js', '**/*.cjs', '**/*.mjs'],
    ...tseslint.configs.disableTypeChecked,
  },
  {
    files: ['**/*.cjs'],
    languageOptions: { sourceType: 'commonjs', globals: { module: 'writable', require: 'readonly' } },
  },
  {
    files: ['scripts/**/*.mjs', 'bench/**/*.mjs'],
    languageOptions: { globals: { process: 'readonly', console: 'readonly' } },
  },
);
