// A generated fleet for the Gantt's load test: NODES nodes in 2 clusters and 3 shapes, two
// workspaces with room for large requests, and a seeded stream of requests that keeps the
// schedule full over the next two weeks.

export const NODES = 5000;

// The fleet YAML (format: src/cluster/fleet_file.h). Telemetry is sparse (every 30 min): the
// test is about the schedule, not 40,000 GPUs reporting.
export function bigFleetYaml(nodes = NODES) {
  const per = Math.floor(nodes / 6);
  const pools = (prefix, extra) => `
      - {shape: 8xh100, count: ${per + extra}, namePrefix: ${prefix}-h100-}
      - {shape: 8xa100, count: ${per}, namePrefix: ${prefix}-a100-}
      - {shape: 4xl40s, count: ${per}, namePrefix: ${prefix}-l40s-}`;
  const rest = nodes - 6 * per;
  return `projects:
  - {name: big}
shapes:
  - {name: 8xh100, gpuModel: H100, gpusPerNode: 8, memoryPerGpuMiB: 81920, interconnect: nvlink, pricePerGpuHour: 4.5}
  - {name: 8xa100, gpuModel: A100, gpusPerNode: 8, memoryPerGpuMiB: 40960, interconnect: nvlink, pricePerGpuHour: 2.9}
  - {name: 4xl40s, gpuModel: L40S, gpusPerNode: 4, memoryPerGpuMiB: 46068, interconnect: pcie, pricePerGpuHour: 1.8}
clusters:
  - name: east
    project: big
    pools:${pools('e', rest)}
  - name: west
    project: big
    pools:${pools('w', 0)}
workspaces:
  - name: train
    project: big
    members: [{user: alice, role: member}]
    policy: {maxNodesPerRequest: 256, maxDuration: 336h, maxActiveRequests: 100000, minPriority: 0, maxPriority: 1000, shareNodes: true}
  - name: infer
    project: big
    members: [{user: bob, role: member}]
    policy: {maxNodesPerRequest: 256, maxDuration: 336h, maxActiveRequests: 100000, minPriority: 0, maxPriority: 1000, shareNodes: true}
simulation:
  provisioningTime: 5s
  precheckFailureRate: 0
  releaseTime: 5s
  telemetryInterval: 30m
  seed: 7
`;
}

// A small seeded generator (mulberry32) so that every run asks the same.
function rng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

// `count` requests: 1 to 128 nodes for 2 h to 3 days, in both workspaces and all shapes, in
// priority order.
export function bigRequests(count, seed = 11) {
  const r = rng(seed);
  const shapes = ['8xh100', '8xa100', '4xl40s'];
  const out = [];
  for (let i = 0; i < count; i++) {
    const ns = r() < 0.5 ? 'train' : 'infer';
    const nodes = Math.max(1, Math.round(Math.exp(r() * Math.log(128))));
    const hours = Math.round(2 + r() * r() * 70);
    out.push({
      apiVersion: 'egs.dev/v1alpha1', kind: 'GPUProvisionRequest',
      metadata: { name: `load-${String(i).padStart(5, '0')}`, namespace: ns },
      spec: { shape: shapes[Math.floor(r() * 3)], nodes, duration: `${hours}h`, priority: Math.floor(r() * 1000) },
    });
  }
  // Highest priority first: each new request then queues behind those already planned, and
  // the scheduler re-plans only it (submitting in random order re-plans the queue behind it).
  return out.sort((a, b) => b.spec.priority - a.spec.priority);
}

// Runs `fn` over `items` with at most `width` calls in flight.
export async function pool(items, width, fn) {
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      await fn(items[i], i);
    }
  };
  await Promise.all(Array.from({ length: width }, worker));
}
