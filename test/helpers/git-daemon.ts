// The git daemon lives in git-daemon.mjs, which the bench (plain Node) shares.
export { startGitDaemon, type GitDaemon } from './git-daemon.mjs';
