// Entry point of /opt/resource/in.
import { runIn } from '../commands/in.js';
import { main } from '../main.js';

await main(runIn);
