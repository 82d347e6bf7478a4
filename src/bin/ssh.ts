// Entry point of the SSH command git runs (GIT_SSH_COMMAND: node with this file).
import { sshMain } from '../ssh-main.js';

await sshMain(process.argv.slice(2));
