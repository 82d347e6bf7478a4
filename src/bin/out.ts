// Entry point of /opt/resource/out.
import { runOut } from '../commands/out.js';
import { main } from '../main.js';

await main(runOut);
