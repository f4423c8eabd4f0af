/**
 * A child process that simulates KVM hosts for the health-round benchmark: an in-process ssh2
 * server (real SSH: key exchange, host key, public-key auth, streamlocal channels) in front of
 * the fake libvirt daemon. Every simulated host is one SSH connection to it. It prints one JSON
 * line with the port and key material, then serves until stdin closes.
 */
import { FakeLibvirtServer } from '../../test/fakes/libvirt/index.ts';
import { FakeSshServer } from '../../test/fakes/ssh/index.ts';

const libvirt = new FakeLibvirtServer({ keepalive: false, requestLogLimit: 1 });
const ssh = new FakeSshServer({ streamlocal: { kind: 'libvirt', server: libvirt } });
const port = await ssh.listen();
const material = await ssh.writeMaterial();
process.stdout.write(`${JSON.stringify({ port, keyFile: material.keyFile, knownHostsFile: material.knownHostsFile })}\n`);
process.stdin.resume();
process.stdin.on('end', () => {
  void ssh.close().then(() => process.exit(0));
});
