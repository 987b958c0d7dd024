/** The build Burrow reports (`burrow --version`, GET /api/v1/instance). Kept in step with package.json. */
export const VERSION = '0.1.0';
