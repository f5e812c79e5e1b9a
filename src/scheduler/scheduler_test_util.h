// Test fixture pieces for scheduler tests: a small fleet builder and a request builder.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/simulated_clock.h"
#include "scheduler/fake_cluster_connector.h"
#include "scheduler/scheduler.h"

namespace egs::scheduler::testing {

inline core::Time T(int hours) { return common::FromUnixMicros(0) + common::Hours(hours); }

// RequestBuilder().Workspace(1).Nodes(2).Hours(4).Priority(100).Build()
class RequestBuilder {
 public:
  RequestBuilder() {
    spec_.workspace = core::WorkspaceId(1);
    spec_.shapes = {core::ShapeId(1)};
    spec_.duration = common::Hours(1);
    spec_.priority = 100;
  }
  RequestBuilder& Workspace(std::uint32_t w) {
    spec_.workspace = core::WorkspaceId(w);
    return *this;
  }
  RequestBuilder& Shapes(std::vector<std::uint32_t> shapes) {
    spec_.shapes.clear();
    for (auto s : shapes) spec_.shapes.push_back(core::ShapeId(s));
    return *this;
  }
  RequestBuilder& Clusters(std::vector<std::uint32_t> clusters) {
    spec_.clusters.clear();
    for (auto c : clusters) spec_.clusters.push_back(core::ClusterId(c));
    return *this;
  }
  RequestBuilder& Nodes(int n) {
    spec_.nodes = n;
    return *this;
  }
  RequestBuilder& Gpus(int g) {
    spec_.gpus_per_node = g;
    return *this;
  }
  RequestBuilder& Hours(int h) {
    spec_.duration = common::Hours(h);
    return *this;
  }
  RequestBuilder& Duration(core::Duration d) {
    spec_.duration = d;
    return *this;
  }
  RequestBuilder& Priority(int p) {
    spec_.priority = p;
    return *this;
  }
  RequestBuilder& Name(std::string name) {
    spec_.name = std::move(name);
    return *this;
  }
  RequestBuilder& EarliestStart(core::Time t) {
    spec_.earliest_start = t;
    return *this;
  }
  core::RequestSpec Build() const { return spec_; }

 private:
  core::RequestSpec spec_;
};

// A scheduler over a simulated clock and an auto-completing fake connector, with helpers to
// build a fleet: AddPool(cluster, shape, nodes, gpus_per_node).
class SchedulerHarness {
 public:
  explicit SchedulerHarness(SchedulerOptions options = {})
      : clock(common::FromUnixMicros(0)),
        connector(FakeClusterConnector::PostingTo(sched)),
        sched(std::make_unique<Scheduler>(clock, connector, options)) {}

  void AddCluster(std::uint32_t id) {
    core::Cluster c;
    c.id = core::ClusterId(id);
    c.name = "cluster-" + std::to_string(id);
    EGS_CHECK(sched->AddCluster(c).ok());
  }
  void AddShape(std::uint32_t id, int gpus) {
    core::GpuShape s;
    s.id = core::ShapeId(id);
    s.name = "shape-" + std::to_string(id);
    s.gpu_model = "H100";
    s.gpus_per_node = gpus;
    EGS_CHECK(sched->AddShape(s).ok());
  }
  // Adds `count` nodes; returns their ids.
  std::vector<core::NodeId> AddNodes(std::uint32_t cluster, std::uint32_t shape, int count,
                                     int gpus) {
    std::vector<core::NodeId> ids;
    for (int i = 0; i < count; ++i) {
      core::Node n;
      n.id = core::NodeId(next_node_++);
      n.name = "node-" + std::to_string(n.id.value());
      n.cluster = core::ClusterId(cluster);
      n.shape = core::ShapeId(shape);
      for (int g = 0; g < gpus; ++g) n.gpus.push_back(core::Gpu{g, "", "H100", 81920, {}});
      EGS_CHECK(sched->AddNode(n).ok());
      ids.push_back(n.id);
    }
    return ids;
  }
  // Adds `count` slots of an autoscaled group (nodes that take `lead` to obtain) with ids from
  // `first_id`: a pool of their own beside the cluster's nodes of the shape.
  void AddSlots(std::uint32_t cluster, std::uint32_t shape, std::uint32_t first_id, int count,
                int gpus, core::Duration lead) {
    for (std::uint32_t id = first_id; id < first_id + static_cast<std::uint32_t>(count); ++id) {
      core::Node slot;
      slot.id = core::NodeId(id);
      slot.name = "slot-" + std::to_string(id);
      slot.cluster = core::ClusterId(cluster);
      slot.shape = core::ShapeId(shape);
      slot.gpus.resize(static_cast<std::size_t>(gpus));
      slot.provisioning_lead_time = lead;
      EGS_CHECK(sched->AddNode(slot).ok());
    }
  }
  void AddWorkspace(std::uint32_t id, core::WorkspacePolicy policy = {}) {
    core::Workspace w;
    w.id = core::WorkspaceId(id);
    w.name = "ws-" + std::to_string(id);
    w.policy = std::move(policy);
    EGS_CHECK(sched->AddWorkspace(w).ok());
  }
  // One cluster, one 8-GPU shape, `nodes` nodes, one workspace allowing `max_active` at once.
  void SimpleFleet(int nodes, int max_active = 100) {
    AddCluster(1);
    AddShape(1, 8);
    AddNodes(1, 1, nodes, 8);
    core::WorkspacePolicy p;
    p.max_active_requests = max_active;
    AddWorkspace(1, p);
  }
  // Runs cycles at the current time until no command is pending.
  void Cycle() {
    sched->RunCycle(clock.Now());
    sched->RunCycle(clock.Now());  // connector outcomes posted in the first
  }
  void AdvanceTo(core::Time t) {
    // Visit every wakeup on the way so that starts and ends happen at their instants.
    for (;;) {
      Cycle();
      auto next = sched->NextWakeup();
      if (!next || *next > t) break;
      clock.AdvanceTo(*next);
    }
    clock.AdvanceTo(t);
    Cycle();
  }
  const RequestRecord& Get(core::RequestId id) const { return *sched->FindRequest(id); }

  common::SimulatedClock clock;
  FakeClusterConnector connector;
  std::unique_ptr<Scheduler> sched;

 private:
  std::uint32_t next_node_ = 1;
};

}  // namespace egs::scheduler::testing
