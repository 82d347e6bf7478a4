// The proxy lives in tcp-proxy.mjs, which the bench (plain Node) shares.
export { startTcpProxy, type TcpProxy } from './tcp-proxy.mjs';
