/**
 * One sample argument and one sample result per procedure of the client's table. The mapped
 * types make the compiler demand an entry for every procedure: a procedure added to the table
 * without samples fails type-checking, and the table-wide tests then cover it.
 */
import type { ArgsOf, ProcedureKey, ResultOf } from '../../../src/kvm/libvirt/procedures.ts';
import type { DomainRef, StoragePoolRef, StorageVolRef } from '../../../src/kvm/libvirt/types.ts';

export const sampleDom: DomainRef = { name: 'sample-dom', uuid: Buffer.alloc(16, 7), id: -1 };
export const samplePool: StoragePoolRef = { name: 'default', uuid: Buffer.alloc(16, 9) };
export const sampleVol: StorageVolRef = { pool: 'default', name: 'sample.img', key: '/fake/pools/default/sample.img' };

export const SAMPLE_ARGS: { [K in ProcedureKey]: ArgsOf<K> } = {
  authList: undefined,
  authPolkit: undefined,
  connectSupportsFeature: { feature: 10 },
  connectOpen: { name: 'qemu:///system', flags: 0 },
  connectClose: undefined,
  getType: undefined,
  getVersion: undefined,
  getLibVersion: undefined,
  getHostname: undefined,
  listAllDomains: { needResults: 1, flags: 0 },
  domainLookupByName: { name: 'sample-dom' },
  domainDefineXml: { xml: "<domain type='qemu'><name>sample-dom</name></domain>", flags: 0 },
  domainCreate: { dom: sampleDom, flags: 0 },
  domainGetState: { dom: sampleDom, flags: 0 },
  domainGetInfo: { dom: sampleDom },
  domainDestroy: { dom: sampleDom, flags: 0 },
  domainUndefine: { dom: sampleDom, flags: 0 },
  domainGetXmlDesc: { dom: sampleDom, flags: 0 },
  domainSetMetadata: { dom: sampleDom, type: 2, metadata: '<e/>', key: 'eg', uri: 'urn:x', flags: 3 },
  domainGetMetadata: { dom: sampleDom, type: 2, uri: 'urn:x', flags: 0 },
  domainInterfaceAddresses: { dom: sampleDom, source: 0, flags: 0 },
  storagePoolLookupByName: { name: 'default' },
  storagePoolGetInfo: { pool: samplePool },
  storagePoolIsActive: { pool: samplePool },
  storagePoolRefresh: { pool: samplePool, flags: 0 },
  storagePoolCreateXml: { xml: "<pool type='dir'><name>p2</name><target><path>/tmp/p2</path></target></pool>", flags: 0 },
  storagePoolDestroy: { pool: { name: 'p2', uuid: Buffer.alloc(16) } },
  storageVolCreateXml: { pool: samplePool, xml: '<volume><name>sample.img</name><capacity>1024</capacity></volume>', flags: 0 },
  storageVolCreateXmlFrom: { pool: samplePool, xml: '<volume><name>clone.img</name></volume>', clonevol: sampleVol, flags: 0 },
  storageVolLookupByName: { pool: samplePool, name: 'sample.img' },
  storageVolGetInfo: { vol: sampleVol },
  storageVolDelete: { vol: sampleVol, flags: 0 },
  storageVolUpload: { vol: sampleVol, offset: 0, length: 0, flags: 0 },
  domainEventRegisterAny: { eventId: 0, dom: null },
  domainEventDeregisterAny: { callbackId: 1 },
};

export const SAMPLE_RESULTS: { [K in ProcedureKey]: ResultOf<K> } = {
  authList: [0, 2],
  authPolkit: 1,
  connectSupportsFeature: true,
  connectOpen: undefined,
  connectClose: undefined,
  getType: 'QEMU',
  getVersion: 7_002_000,
  getLibVersion: 9_000_000,
  getHostname: 'host-é', // multi-byte UTF-8 on purpose
  listAllDomains: { domains: [sampleDom, { ...sampleDom, name: 'b', id: 3 }], ret: 2 },
  domainLookupByName: sampleDom,
  domainDefineXml: sampleDom,
  domainCreate: { ...sampleDom, id: 4 },
  domainGetState: { state: 1, reason: 1 },
  domainGetInfo: { state: 1, maxMemKiB: 65536, memoryKiB: 65536, nrVirtCpu: 1, cpuTimeNs: 1_795_963_845_525_708_000n },
  domainDestroy: undefined,
  domainUndefine: undefined,
  domainGetXmlDesc: '<domain/>',
  domainSetMetadata: undefined,
  domainGetMetadata: '<egress managed="true"/>',
  domainInterfaceAddresses: [{ name: 'vnet0', hwaddr: null, addrs: [{ type: 0, addr: '192.168.122.5', prefix: 24 }] }],
  storagePoolLookupByName: samplePool,
  storagePoolGetInfo: { state: 2, stateWord: 'running', capacity: 2 ** 40, allocation: 12345, available: 2 ** 40 - 12345 },
  storagePoolIsActive: false,
  storagePoolRefresh: undefined,
  storagePoolCreateXml: samplePool,
  storagePoolDestroy: undefined,
  storageVolCreateXml: sampleVol,
  storageVolCreateXmlFrom: sampleVol,
  storageVolLookupByName: sampleVol,
  storageVolGetInfo: { type: 0, capacity: 1024, allocation: 0 },
  storageVolDelete: undefined,
  storageVolUpload: undefined,
  domainEventRegisterAny: 1,
  domainEventDeregisterAny: undefined,
};
