// @ts-check
import js from '@eslint/js';
import tseslint from 'typescript-eslint';
import prettier from 'eslint-config-prettier';

export default tseslint.config(
  { ignores: ['node_modules/**', 'dist/**', '.egress/**', 'coverage/**', '.stryker/**', '.stryker-tmp/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  // Layout is prettier's (`npm run format`); no lint rule argues with it.
  prettier,
  {
    languageOptions: {
      parserOptions: {
        projectService: true,
        tsconfigRootDir: import.meta.dirname,
      },
    },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/consistent-type-imports': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/only-throw-error': 'error',
      'no-restricted-properties': [
        'error',
        { object: 'process', property: 'env', message: 'Read process.env only in entry points (src/cli/); pass config down.' },
      ],
    },
  },
  {
    files: ['src/cli/**', 'test/**', 'bench/**', 'vitest.config.ts', 'vitest.mutation.config.ts', 'bin/**'],
    rules: { 'no-restricted-properties': 'off' },
  },
  {
    // The local proxy program is an entry point of its own (a separate process, also the future
    // container/VM image's): EGRESS_PROXY_POLICY is its configuration.
    files: ['src/providers/local/proxy-process.ts'],
    rules: { 'no-restricted-properties': 'off' },
  },
  {
    files: ['test/**', 'bench/**'],
    rules: {
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-member-access': 'off',
      '@typescript-eslint/no-unsafe-argument': 'off',
      '@typescript-eslint/no-unsafe-call': 'off',
      '@typescript-eslint/no-non-null-assertion': 'off',
      '@typescript-eslint/require-await': 'off',
    },
  },
  {
    // Plain JavaScript is linted without types: no project service (its default project is bounded
    // to 8 files, and the scripts, bin and support preloads are more).
    files: ['**/*.js', '**/*.mjs'],
    ...tseslint.configs.disableTypeChecked,
    languageOptions: {
      ...tseslint.configs.disableTypeChecked.languageOptions,
      globals: { process: 'readonly', console: 'readonly', URL: 'readonly' },
    },
  },
  {
    // CommonJS preloads for child processes under test (`node --require`).
    files: ['**/*.cjs'],
    ...tseslint.configs.disableTypeChecked,
    languageOptions: {
      ...tseslint.configs.disableTypeChecked.languageOptions,
      sourceType: 'commonjs',
      globals: { process: 'readonly', require: 'readonly', __dirname: 'readonly' },
    },
    rules: { ...tseslint.configs.disableTypeChecked.rules, '@typescript-eslint/no-require-imports': 'off' },
  },
);
