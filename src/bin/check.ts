// Entry point of /opt/resource/check.
import { runCheck } from '../commands/check.js';
import { main } from '../main.js';

await main(runCheck);
