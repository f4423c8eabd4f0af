/**
 * Numbers of libvirt's remote protocol (virnetprotocol.x, virkeepaliveprotocol.x, remote_protocol.x).
 * See docs/libvirt-client.md and the protocol notes for where each one matters.
 */

export const REMOTE_PROGRAM = 0x20008086;
export const KEEPALIVE_PROGRAM = 0x6b656570;
export const PROTOCOL_VERSION = 1;

export const KEEPALIVE_PROC_PING = 1;
export const KEEPALIVE_PROC_PONG = 2;

/** Message types (virNetMessageType). */
export const MessageType = {
  CALL: 0,
  REPLY: 1,
  MESSAGE: 2,
  STREAM: 3,
  CALL_WITH_FDS: 4,
  REPLY_WITH_FDS: 5,
  STREAM_HOLE: 6,
} as const;

/** Message statuses (virNetMessageStatus). */
export const MessageStatus = {
  OK: 0,
  ERROR: 1,
  CONTINUE: 2,
} as const;

/** Bytes of the length word plus the 24-byte header. */
export const FRAME_HEADER_BYTES = 28;
/** VIR_NET_MESSAGE_MAX: a message without its length word may be at most this long. */
export const MESSAGE_MAX = 33_554_432;
/** Largest acceptable value of the length word (it counts itself). */
export const FRAME_MAX = MESSAGE_MAX + 4;
/** REMOTE_STRING_MAX: longer strings are rejected. */
export const STRING_MAX = 4_194_304;
/** VIR_NET_MESSAGE_LEGACY_PAYLOAD_MAX: the stream chunk size every daemon accepts (< 256 KiB). */
export const STREAM_CHUNK_MAX = 262_120;

/** Limits of variable-length arrays in remote_protocol.x. */
export const Limits = {
  AUTH_TYPE_LIST_MAX: 20,
  DOMAIN_LIST_MAX: 16_384,
  STORAGE_POOL_LIST_MAX: 4_096,
  STORAGE_VOL_LIST_MAX: 16_384,
  DOMAIN_INTERFACE_MAX: 2_048,
  DOMAIN_IP_ADDR_MAX: 2_048,
} as const;

/** REMOTE_PROGRAM procedure numbers used by this client. */
export const Proc = {
  CONNECT_OPEN: 1,
  CONNECT_CLOSE: 2,
  CONNECT_GET_TYPE: 3,
  CONNECT_GET_VERSION: 4,
  DOMAIN_GET_XML_DESC: 14,
  DOMAIN_GET_INFO: 16,
  DOMAIN_LOOKUP_BY_NAME: 23,
  DOMAIN_LOOKUP_BY_UUID: 24,
  CONNECT_GET_HOSTNAME: 59,
  CONNECT_SUPPORTS_FEATURE: 60,
  AUTH_LIST: 66,
  AUTH_POLKIT: 70,
  STORAGE_POOL_CREATE_XML: 76,
  STORAGE_POOL_CREATE: 78,
  STORAGE_POOL_DESTROY: 80,
  STORAGE_POOL_REFRESH: 83,
  STORAGE_POOL_LOOKUP_BY_NAME: 84,
  STORAGE_POOL_GET_INFO: 87,
  STORAGE_VOL_CREATE_XML: 93,
  STORAGE_VOL_DELETE: 94,
  STORAGE_VOL_LOOKUP_BY_NAME: 95,
  STORAGE_VOL_GET_INFO: 98,
  STORAGE_VOL_GET_PATH: 100,
  DOMAIN_IS_ACTIVE: 150,
  STORAGE_VOL_CREATE_XML_FROM: 125,
  STORAGE_POOL_IS_ACTIVE: 154,
  CONNECT_GET_LIB_VERSION: 157,
  DOMAIN_CREATE_WITH_FLAGS: 196,
  STORAGE_VOL_UPLOAD: 208,
  STORAGE_VOL_DOWNLOAD: 209,
  DOMAIN_GET_STATE: 212,
  DOMAIN_UNDEFINE_FLAGS: 231,
  DOMAIN_DESTROY_FLAGS: 234,
  DOMAIN_SHUTDOWN_FLAGS: 258,
  STORAGE_VOL_RESIZE: 260,
  DOMAIN_SET_METADATA: 264,
  DOMAIN_GET_METADATA: 265,
  CONNECT_LIST_ALL_DOMAINS: 273,
  CONNECT_LIST_ALL_STORAGE_POOLS: 281,
  STORAGE_POOL_LIST_ALL_VOLUMES: 282,
  CONNECT_DOMAIN_EVENT_CALLBACK_REGISTER_ANY: 316,
  CONNECT_DOMAIN_EVENT_CALLBACK_DEREGISTER_ANY: 317,
  DOMAIN_EVENT_CALLBACK_LIFECYCLE: 318,
  DOMAIN_DEFINE_XML_FLAGS: 350,
  DOMAIN_INTERFACE_ADDRESSES: 353,
} as const;

/** CONNECT_SUPPORTS_FEATURE argument that turns on the daemon's keepalive pings. */
export const FEATURE_PROGRAM_KEEPALIVE = 10;
/** CONNECT_OPEN flag: read-only connection. */
export const CONNECT_RO = 1;

/** Auth types returned by AUTH_LIST. */
export const AuthType = { NONE: 0, SASL: 1, POLKIT: 2 } as const;

/** virErrorNumber values this client reasons about. */
export const ErrorCode = {
  INTERNAL_ERROR: 1,
  NO_SUPPORT: 3,
  OPERATION_FAILED: 9,
  DOM_EXIST: 28,
  SYSTEM_ERROR: 38,
  RPC: 39,
  NO_DOMAIN: 42,
  NO_NETWORK: 43,
  AUTH_FAILED: 45,
  NO_STORAGE_POOL: 49,
  NO_STORAGE_VOL: 50,
  OPERATION_INVALID: 55,
  OPERATION_TIMEOUT: 68,
  ARGUMENT_UNSUPPORTED: 74,
  AUTH_CANCELLED: 79,
  NO_DOMAIN_METADATA: 80,
  OPERATION_UNSUPPORTED: 84,
  AGENT_UNRESPONSIVE: 86,
  RESOURCE_BUSY: 87,
  ACCESS_DENIED: 88,
  STORAGE_VOL_EXIST: 90,
} as const;

/** virErrorDomain values this client reasons about. */
export const ErrorDomain = {
  RPC: 7,
  QEMU: 10,
  TEST: 12,
  REMOTE: 13,
  STORAGE: 18,
  NETWORK: 19,
  DOMAIN: 20,
  STREAMS: 38,
  POLKIT: 60,
} as const;

/** virDomainState. */
export const DomainState = {
  NOSTATE: 0,
  RUNNING: 1,
  BLOCKED: 2,
  PAUSED: 3,
  SHUTDOWN: 4,
  SHUTOFF: 5,
  CRASHED: 6,
  PMSUSPENDED: 7,
} as const;

/** virStoragePoolState. */
export const StoragePoolState = {
  INACTIVE: 0,
  BUILDING: 1,
  RUNNING: 2,
  DEGRADED: 3,
  INACCESSIBLE: 4,
} as const;

/** virDomainMetadataType. */
export const MetadataType = { DESCRIPTION: 0, TITLE: 1, ELEMENT: 2 } as const;

/** virDomainModificationImpact, used as flags of the metadata calls. */
export const ModificationImpact = { CURRENT: 0, LIVE: 1, CONFIG: 2 } as const;
