// The loopback helpers live in net.mjs, which the bench (plain Node) shares.
export { accepts, freePort, whenListening, type Listening } from './net.mjs';
