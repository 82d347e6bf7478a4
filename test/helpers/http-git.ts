// The HTTP server lives in http-git.mjs, which the bench (plain Node) shares.
export { startHttpGit, type HttpGitServer, type HttpGitOptions } from './http-git.mjs';
