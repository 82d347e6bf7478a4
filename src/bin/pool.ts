// Entry point of /opt/resource/pool, the command-line tool for people: argv in, text out.
import { runPool } from '../commands/pool.js';
import { main } from '../main.js';

await main(runPool, { readStdin: false, render: (text) => String(text) });
