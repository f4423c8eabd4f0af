/**
 * undici's HTTP/1.1 client module alone: the proxy programs bundle this one file's graph (about a
 * third of undici's size: no fetch, WebSocket or cache), which keeps a booted VM's user-data under
 * GCE's 256 KiB metadata limit. It exports the same `Client` class as the package's index.
 */
declare module 'undici/lib/dispatcher/client.js' {
  import type { Client } from 'undici';
  const ClientClass: typeof Client;
  export default ClientClass;
}
