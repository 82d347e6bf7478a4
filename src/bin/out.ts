// Entry point of /opt/resource/out.
import { OUT_USAGE, runOut } from '../commands/out.js';
import { main } from '../main.js';

await main(runOut, { usage: OUT_USAGE });
