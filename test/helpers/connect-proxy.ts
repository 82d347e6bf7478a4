// The proxy lives in connect-proxy.mjs, which the bench (plain Node) shares.
export { startConnectProxy, type ConnectProxy } from './connect-proxy.mjs';
