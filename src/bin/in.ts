// Entry point of /opt/resource/in.
import { IN_USAGE, runIn } from '../commands/in.js';
import { main } from '../main.js';

await main(runIn, { usage: IN_USAGE });
