export { FakeCompute, startFakeCompute, type ComputeFault, type ComputeRequest, type FakeComputeOptions } from './server.ts';
export { INSTANCE_STATUSES, type FakeFirewall, type FakeInstance, type FakeOperation, type InstanceStatus, type OperationFailure } from './state.ts';
export { parseFilter, matchesFilter, FilterError } from './filter.ts';
